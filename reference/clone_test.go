package reference_test

import (
	"reflect"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

func fullPlan() reference.Plan {
	st := func(rev int64) *reference.DocumentState {
		return &reference.DocumentState{Space: "s", DocumentID: "d", Revision: rev, OperationID: "op", ContentHash: "h", ExtractionFingerprint: "m", Status: reference.DocActive,
			FactSources: []reference.EdgeKey{{Source: "a", Type: "R", Target: "b"}}, NodeIDs: []string{"a", "b"}, CommittedAt: 7}
	}
	return reference.Plan{
		Kind: reference.Ingestion, OperationID: "op", Space: "s", DocumentID: "d",
		Options: reference.GraphOptions{Space: "s", ReadOnly: true, Attributes: map[string]string{"k": "v"}},
		Mutation: reference.Mutation{OperationID: "op", DeleteNodes: []string{"x"}, DeleteEdges: []reference.EdgeKey{{Source: "x", Type: "R", Target: "y"}},
			UpsertNodes: []reference.NodeUpsert{{ID: "a", Label: "L", Properties: map[string]string{"p": "1"}}},
			UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: "a", Type: "R", Target: "b"}, Properties: map[string]string{"w": "2"}}}},
		PreviousState: st(1), NextState: st(2),
		StaleEdges:    []reference.EdgeKey{{Source: "c", Type: "R", Target: "d"}},
		Registrations: []reference.EntityRegistration{{NodeID: "a", Type: "T", CanonicalName: "A", Aliases: []string{"aa"}, Properties: map[string]string{"q": "3"}}},
		Content:       "text", ExtractionCall: 1,
	}
}

// refs collects every map, pointer and slice backing array reachable from v,
// and fails on a reference-typed field left empty (so a field added to the
// model later is covered only once the fixture fills it).
func refs(t *testing.T, v reflect.Value, path string, out map[uintptr]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice:
		if v.IsNil() || (v.Kind() != reflect.Pointer && v.Len() == 0) {
			t.Fatalf("fixture leaves %s empty: fill it so Clone is tested on it", path)
		}
		out[v.Pointer()] = path
	}
	switch v.Kind() {
	case reflect.Pointer:
		refs(t, v.Elem(), path, out)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			refs(t, v.Field(i), path+"."+v.Type().Field(i).Name, out)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			refs(t, v.Index(i), path+"[]", out)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			refs(t, v.MapIndex(k), path+"{}", out)
		}
	}
}

func TestCloneSharesNothing(t *testing.T) {
	p := fullPlan()
	c := p.Clone()
	if !reflect.DeepEqual(p, c) {
		t.Fatalf("clone differs:\n%+v\n%+v", p, c)
	}
	a, b := map[uintptr]string{}, map[uintptr]string{}
	refs(t, reflect.ValueOf(p), "Plan", a)
	refs(t, reflect.ValueOf(c), "Plan", b)
	for ptr, path := range b {
		if other, ok := a[ptr]; ok {
			t.Errorf("clone shares %s with the original (%s)", path, other)
		}
	}
}

// A caller that edits a decoded plan or state does not change what the
// next caller decodes from the same payload.
func TestDecodeMemoHandsOutCopies(t *testing.T) {
	p := fullPlan()
	payload, err := reference.EncodePlan(p)
	if err != nil {
		t.Fatal(err)
	}
	fp := reference.Fingerprint(p)
	first, err := reference.DecodePlan(payload, fp)
	if err != nil {
		t.Fatal(err)
	}
	first.Mutation.UpsertNodes[0].Properties["p"] = "changed"
	first.NextState.NodeIDs[0] = "changed"
	first.Registrations[0].Aliases[0] = "changed"
	second, err := reference.DecodePlan(payload, fp)
	if err != nil {
		t.Fatal(err)
	}
	if reference.Fingerprint(second) != fp {
		t.Fatal("an edit of one decoded plan leaked into the next decode")
	}
	if _, err := reference.DecodePlan(payload, "0000"); err == nil {
		t.Fatal("a remembered plan was accepted under another fingerprint")
	}
	sb, _ := reference.EncodeState(*p.NextState)
	s1, err := reference.DecodeState(sb)
	if err != nil {
		t.Fatal(err)
	}
	s1.FactSources[0].Source = "changed"
	s2, _ := reference.DecodeState(sb)
	if s2.FactSources[0].Source != "a" {
		t.Fatal("an edit of one decoded state leaked into the next decode")
	}
}
