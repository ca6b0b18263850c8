package properties

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/reference"
)

// reshapedStates hands back every state it reads through reshape, as a
// store over the store protocol may give back what it was given.
type reshapedStates struct {
	reference.DocumentStateStore
	reshape func(reference.DocumentState) reference.DocumentState
}

func (s reshapedStates) FindCurrent(ctx context.Context, space, doc string) (reference.DocumentState, bool, error) {
	st, ok, err := s.DocumentStateStore.FindCurrent(ctx, space, doc)
	return s.reshape(st), ok, err
}

func (s reshapedStates) FindByOperationID(ctx context.Context, space, doc, op string) (reference.DocumentState, bool, error) {
	st, ok, err := s.DocumentStateStore.FindByOperationID(ctx, space, doc, op)
	return s.reshape(st), ok, err
}

func (s reshapedStates) Versions(ctx context.Context, space, doc string) ([]reference.DocumentState, error) {
	vs, err := s.DocumentStateStore.Versions(ctx, space, doc)
	for i := range vs {
		vs[i] = s.reshape(vs[i])
	}
	return vs, err
}

func (s reshapedStates) List(ctx context.Context, space string) ([]reference.DocumentState, error) {
	vs, err := s.DocumentStateStore.List(ctx, space)
	for i := range vs {
		vs[i] = s.reshape(vs[i])
	}
	return vs, err
}

// reshapedFailures runs the Stores suite on the memory store whose states
// come back through reshape.
func reshapedFailures(reshape func(reference.DocumentState) reference.DocumentState) map[string]string {
	return StoresFailures(func(string, string) (reference.Stores, error) {
		return withStates(func(s reference.DocumentStateStore) reference.DocumentStateStore {
			return reshapedStates{s, reshape}
		})(memory.New(memory.Options{})), nil
	})
}

// A store that answers "factSources": [] (and "nodeIds": []) for a state
// given none passes: the spec says [], null and absent mean the same.
// Behaviour/StateHistory compared with reflect.DeepEqual, and failed it.
func TestEmptyListsMeanNone(t *testing.T) {
	failed := reshapedFailures(func(st reference.DocumentState) reference.DocumentState {
		if st.FactSources == nil {
			st.FactSources = []reference.EdgeKey{}
		}
		if st.NodeIDs == nil {
			st.NodeIDs = []string{}
		}
		return st
	})
	for path, msg := range failed {
		t.Errorf("%s: %s", path, msg)
	}
}

// A store that keeps factSources and nodeIds as sets (Agents-Flex's JDBC
// stores) and gives them back in another order passes: the invariants
// read them as sets, and the spec says so. DocumentStateStore/
// ModelBasedCommands failed it on the order alone.
func TestSetFieldsInAnyOrder(t *testing.T) {
	failed := reshapedFailures(func(st reference.DocumentState) reference.DocumentState {
		st.FactSources, st.NodeIDs = slices.Clone(st.FactSources), slices.Clone(st.NodeIDs)
		slices.Reverse(st.FactSources)
		slices.Reverse(st.NodeIDs)
		return st
	})
	for path, msg := range failed {
		t.Errorf("%s: %s", path, msg)
	}
}

// Sets compare as sets, not as anything: a store that loses a fact source
// or changes a node id still fails, and the message names the field and
// shows both values as JSON.
func TestWrongSetContentFails(t *testing.T) {
	for _, c := range []struct {
		name    string
		reshape func(reference.DocumentState) reference.DocumentState
		want    []string
	}{
		{"a lost fact source", func(st reference.DocumentState) reference.DocumentState {
			if len(st.FactSources) > 0 {
				st.FactSources = slices.Clone(st.FactSources[1:])
			}
			return st
		}, []string{`factSources: want [{"source":"a","type":"T","target":"b","rank":0}]`, "got null"}},
		{"a changed node id", func(st reference.DocumentState) reference.DocumentState {
			if len(st.NodeIDs) > 0 {
				st.NodeIDs = append([]string{"n-other"}, st.NodeIDs[1:]...)
			}
			return st
		}, []string{`nodeIds: want ["n-op1"]`, `got ["n-other"]`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			failed := reshapedFailures(c.reshape)
			msg, ok := failed["Behaviour/States"]
			if !ok {
				t.Fatalf("the suite passed Behaviour/States for a store with %s; it failed only in %v", c.name, failedLeaves(failed))
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Behaviour/States message does not say %q:\n%s", w, msg)
				}
			}
			if _, ok := failed["DocumentStateStore/ModelBasedCommands"]; !ok {
				t.Errorf("DocumentStateStore/ModelBasedCommands passed a store with %s; it failed only in %v", c.name, failedLeaves(failed))
			}
		})
	}
}

// failedLeaves are the failed subtests that are no other's parent.
func failedLeaves(failed map[string]string) []string {
	var out []string
	for p := range failed {
		leaf := true
		for q := range failed {
			if strings.HasPrefix(q, p+"/") {
				leaf = false
			}
		}
		if leaf {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// confDiff names each difference by its path in the protocol's JSON, with
// both values as JSON; [] and null are no difference, nor is a set's order.
func TestConfDiffNamesThePath(t *testing.T) {
	want := reference.Graph{Nodes: map[string]reference.Node{"a": {ID: "a", Label: "P", Properties: map[string]string{"age": "1"}}, "b": {ID: "b"}}}
	got := reference.Graph{Nodes: map[string]reference.Node{"a": {ID: "a", Label: "P", Properties: map[string]string{"age": "2"}}, "c": {ID: "c", Properties: map[string]string{}}}}
	d := confDiff(want, got)
	for _, w := range [][2]string{
		{`nodes["a"].properties["age"]: want "1"`, `got "2"`},
		{`nodes["b"]: want {"id":"b","label":""}`, `got (absent)`},
		{`nodes["c"]: want (absent)`, `got {"id":"c","label":""}`},
	} {
		if i := strings.Index(d, w[0]); i < 0 || !strings.HasPrefix(strings.TrimLeft(d[i+len(w[0]):], " \n"), w[1]) {
			t.Errorf("confDiff does not say %s, then %s; it says:%s", w[0], w[1], d)
		}
	}
	s := reference.DocumentState{Space: "sp", FactSources: []reference.EdgeKey{{Source: "a"}, {Source: "b"}}, NodeIDs: []string{}}
	r := s
	r.FactSources, r.NodeIDs = []reference.EdgeKey{{Source: "b"}, {Source: "a"}, {Source: "a"}}, nil
	if !confEqual(s, r) {
		t.Errorf("a set in another order, with a repeat, and [] against null differ:%s", confDiff(s, r))
	}
}
