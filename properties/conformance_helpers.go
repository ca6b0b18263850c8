package properties

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leanovate/gopter"

	"github.com/crashmatrix/crashmatrix/reference"
)

// ConformanceSeedEnv names the environment variable that fixes the gopter
// seed of the model-based subtests, to replay a reported failure.
const ConformanceSeedEnv = "CRASHMATRIX_CONFORMANCE_SEED"

// confNow is the deterministic base time of every suite (unix ms).
const confNow int64 = 1_000_000

// confWorkers is how many goroutines race in the concurrency subtests.
const confWorkers = 16

var confCtx = context.Background()

// confSetFields are the fields compared as sets: whatever their order and
// repeats, as the invariants read them (check/ and the plan fingerprint
// look at membership only) and as docs/store-protocol.md (section 4.1)
// says. A store may keep them as sets (a JDBC store's join table).
var confSetFields = map[reflect.Type][]string{
	reflect.TypeFor[reference.DocumentState](): {"FactSources", "NodeIDs"},
}

// confCanon returns a deep copy of v in the form the spec compares: every
// empty slice and map made nil ([], null and absent mean the same), and
// every set field (confSetFields) sorted, without repeats.
func confCanon[V any](v V) V {
	rv := reflect.ValueOf(&v).Elem()
	out := reflect.New(rv.Type()).Elem()
	out.Set(confCanonValue(rv))
	return out.Interface().(V)
}

func confCanonValue(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		n := reflect.New(v.Type().Elem())
		n.Elem().Set(confCanonValue(v.Elem()))
		return n
	case reflect.Struct:
		n := reflect.New(v.Type()).Elem()
		for i := 0; i < v.NumField(); i++ {
			if n.Field(i).CanSet() {
				n.Field(i).Set(confCanonValue(v.Field(i)))
			}
		}
		for _, name := range confSetFields[v.Type()] {
			confSortSet(n.FieldByName(name))
		}
		return n
	case reflect.Slice:
		if v.Len() == 0 {
			return reflect.Zero(v.Type())
		}
		n := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			n.Index(i).Set(confCanonValue(v.Index(i)))
		}
		return n
	case reflect.Map:
		if v.Len() == 0 {
			return reflect.Zero(v.Type())
		}
		n := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			n.SetMapIndex(it.Key(), confCanonValue(it.Value()))
		}
		return n
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		n := reflect.New(v.Type()).Elem()
		n.Set(confCanonValue(v.Elem()))
		return n
	default:
		return v
	}
}

// confSortSet sorts the slice s (a fresh copy, settable) by its elements'
// JSON and drops repeats.
func confSortSet(s reflect.Value) {
	keys := make([]string, s.Len())
	idx := make([]int, s.Len())
	for i := range idx {
		idx[i], keys[i] = i, confShow(s.Index(i).Interface())
	}
	sort.SliceStable(idx, func(a, b int) bool { return keys[idx[a]] < keys[idx[b]] })
	out := reflect.MakeSlice(s.Type(), 0, s.Len())
	for j, i := range idx {
		if j > 0 && keys[i] == keys[idx[j-1]] {
			continue
		}
		out = reflect.Append(out, s.Index(i))
	}
	if s.Len() > 0 {
		s.Set(out)
	}
}

// confEqual compares after confCanon.
func confEqual[V any](a, b V) bool { return reflect.DeepEqual(confCanon(a), confCanon(b)) }

// confMaxDiffs is how many differences confDiff lists.
const confMaxDiffs = 12

// confDiff lists where got differs from want (after confCanon), one entry
// per difference: the field path, in the store protocol's JSON names
// ("[1].factSources", "nodes[\"a\"].properties"), and both values as
// JSON, for failure messages. Each entry starts on a new line.
func confDiff[V any](want, got V) string {
	w, g := confCanon(want), confCanon(got)
	var d confDiffer
	d.walk("", reflect.ValueOf(&w).Elem(), reflect.ValueOf(&g).Elem())
	switch {
	case d.n == 0:
		return "\n  (no field differs)"
	case d.n > confMaxDiffs:
		fmt.Fprintf(&d.b, "\n  … and %d more differences", d.n-confMaxDiffs)
	}
	return d.b.String()
}

// confDiffer collects confDiff's differences.
type confDiffer struct {
	b bytes.Buffer
	n int
}

func (d *confDiffer) walk(path string, w, g reflect.Value) {
	if !w.CanInterface() || reflect.DeepEqual(w.Interface(), g.Interface()) {
		return
	}
	switch w.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !w.IsNil() && !g.IsNil() && (w.Kind() == reflect.Pointer || w.Elem().Type() == g.Elem().Type()) {
			d.walk(path, w.Elem(), g.Elem())
			return
		}
	case reflect.Struct:
		sets := confSetFields[w.Type()]
		for i := 0; i < w.NumField(); i++ {
			f := w.Type().Field(i)
			switch {
			case !f.IsExported():
			case slices.Contains(sets, f.Name): // a set: whole, not by index
				if !reflect.DeepEqual(w.Field(i).Interface(), g.Field(i).Interface()) {
					d.add(confPath(path, confJSONName(f)), confShow(w.Field(i).Interface()), confShow(g.Field(i).Interface()))
				}
			default:
				d.walk(confPath(path, confJSONName(f)), w.Field(i), g.Field(i))
			}
		}
		return
	case reflect.Slice, reflect.Array:
		if w.Len() == g.Len() && w.Len() > 0 {
			for i := 0; i < w.Len(); i++ {
				d.walk(fmt.Sprintf("%s[%d]", path, i), w.Index(i), g.Index(i))
			}
			return
		}
	case reflect.Map:
		if !w.IsNil() && !g.IsNil() {
			keys := map[string]reflect.Value{}
			for _, m := range []reflect.Value{w, g} {
				for _, k := range m.MapKeys() {
					keys[confShow(k.Interface())] = k
				}
			}
			names := make([]string, 0, len(keys))
			for k := range keys {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, name := range names {
				p := fmt.Sprintf("%s[%s]", path, name)
				wv, gv := w.MapIndex(keys[name]), g.MapIndex(keys[name])
				switch {
				case !wv.IsValid():
					d.add(p, "(absent)", confShow(gv.Interface()))
				case !gv.IsValid():
					d.add(p, confShow(wv.Interface()), "(absent)")
				default:
					d.walk(p, wv, gv)
				}
			}
			return
		}
	}
	d.add(path, confShow(w.Interface()), confShow(g.Interface()))
}

func (d *confDiffer) add(path, want, got string) {
	d.n++
	if d.n > confMaxDiffs {
		return
	}
	if path == "" {
		path = "value"
	}
	fmt.Fprintf(&d.b, "\n  %s: want %s\n  %*s   got %s", path, want, len(path), "", got)
}

// confPath is path.name, or name at the top.
func confPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// confJSONName is a field's name in JSON: its json tag's, else its own
// with a lower-case first letter (Edges: edges).
func confJSONName(f reflect.StructField) string {
	if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
		return name
	}
	return strings.ToLower(f.Name[:1]) + f.Name[1:]
}

// confShow renders a value compactly (JSON when possible, without
// escaping <, > and &: "token > 1", not "token \u003e 1").
func confShow(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err == nil {
		return strings.TrimSuffix(b.String(), "\n")
	}
	return fmt.Sprintf("%+v", v)
}

// confRace runs f(i) for i in [0, n) on n goroutines released together, and
// returns the results in index order.
func confRace[R any](n int, f func(i int) R) []R {
	out := make([]R, n)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			out[i] = f(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return out
}

// confPlan builds a minimal valid INGESTION plan for a document at an
// expected revision.
func confPlan(opID, space, doc string, expected int64) reference.Plan {
	p := reference.Plan{
		Kind:        reference.Ingestion,
		OperationID: opID,
		Space:       space,
		DocumentID:  doc,
		Options:     reference.GraphOptions{Space: space},
		Mutation:    reference.Mutation{OperationID: opID},
		NextState: &reference.DocumentState{
			Space: space, DocumentID: doc, Revision: expected + 1, OperationID: opID,
			ContentHash: reference.ContentHash(doc + opID), Status: reference.DocActive,
		},
		Content: "content of " + doc,
	}
	if expected > 0 {
		p.PreviousState = &reference.DocumentState{
			Space: space, DocumentID: doc, Revision: expected, OperationID: "previous-" + opID,
			Status: reference.DocActive,
		}
	}
	return p
}

// confFullPlan builds a plan that uses every field, to prove the round trip.
func confFullPlan(opID, space, doc string) reference.Plan {
	alice := reference.NodeID("Person", "Alice Smith")
	acme := reference.NodeID("Organization", "Acme")
	old := reference.NodeID("Person", "Old Name")
	works := reference.EdgeKey{Source: alice, Type: "WORKS_AT", Target: acme}
	knows := reference.EdgeKey{Source: alice, Type: "KNOWS", Target: old, Rank: 2}
	return reference.Plan{
		Kind:        reference.Ingestion,
		OperationID: opID,
		Space:       space,
		DocumentID:  doc,
		Options: reference.GraphOptions{Space: space, ReadOnly: false,
			Attributes: map[string]string{"tenant": "t-1", "schema": "v3", "connection": "neo4j-main"}},
		Mutation: reference.Mutation{
			OperationID: opID,
			DeleteNodes: []string{old, "legacy:1"},
			DeleteEdges: []reference.EdgeKey{knows, {Source: "x", Type: "T", Target: "y", Rank: 7}},
			UpsertNodes: []reference.NodeUpsert{
				{ID: alice, Label: "Person", Properties: map[string]string{"name": "Alice Smith", "age": "41"}},
				{ID: acme, Label: "Organization", Properties: map[string]string{"name": "Acme"}},
				{ID: "bare:1", Label: "Thing"},
			},
			UpsertEdges: []reference.EdgeUpsert{
				{Key: works, Properties: map[string]string{"since": "2020", "chapter": "1"}},
				{Key: reference.EdgeKey{Source: acme, Type: "OWNS", Target: "bare:1", Rank: 1}},
			},
		},
		PreviousState: &reference.DocumentState{
			Space: space, DocumentID: doc, Revision: 4, OperationID: "op-previous",
			ContentHash: "hash-4", ExtractionFingerprint: "xf-4", Status: reference.DocActive,
			FactSources: []reference.EdgeKey{knows}, NodeIDs: []string{alice, old}, CommittedAt: 444,
		},
		NextState: &reference.DocumentState{
			Space: space, DocumentID: doc, Revision: 5, OperationID: opID,
			ContentHash: "hash-5", ExtractionFingerprint: "xf-5", Status: reference.DocActive,
			FactSources: []reference.EdgeKey{works, {Source: acme, Type: "OWNS", Target: "bare:1", Rank: 1}},
			NodeIDs:     []string{alice, acme, "bare:1"}, CommittedAt: 555,
		},
		StaleEdges: []reference.EdgeKey{knows},
		Registrations: []reference.EntityRegistration{
			{NodeID: alice, Type: "Person", CanonicalName: "Alice Smith", Aliases: []string{"Alice", "A. Smith"},
				Properties: map[string]string{"role": "engineer"}},
			{NodeID: acme, Type: "Organization", CanonicalName: "Acme"},
		},
		Content:        "Alice Smith works at Acme.\n林默 加入 青云会。",
		ExtractionCall: 1,
	}
}

// confOp is the PREPARED operation of p at time at.
func confOp(p reference.Plan, at int64) reference.Operation { return reference.NewOperation(p, at) }

// confMutable strips the claim fields, which CompareAndSet does not own.
func confMutable(o reference.Operation) reference.Operation {
	o.ClaimHolder, o.ClaimExpiresAt = "", 0
	return o
}

// confSeed returns the gopter seed: ConformanceSeedEnv if set, else the
// clock.
func confSeed(t suiteT) int64 {
	if s := os.Getenv(ConformanceSeedEnv); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q is not an integer seed: %v", ConformanceSeedEnv, s, err)
		}
		return n
	}
	return time.Now().UnixNano()
}

// confCheckProp runs a gopter property and fails t with gopter's report,
// the seed and the command line that replays it.
func confCheckProp(t suiteT, name string, prop gopter.Prop, minTests, maxSize int) {
	t.Helper()
	seed := confSeed(t)
	params := gopter.DefaultTestParametersWithSeed(seed)
	params.MinSuccessfulTests = minTests
	params.MaxSize = maxSize
	params.MaxShrinkCount = 200
	res := prop.Check(params)
	if res.Passed() {
		return
	}
	var buf bytes.Buffer
	gopter.NewFormatedReporter(true, 160, &buf).ReportTestResult(name, res)
	t.Errorf("model-based property %q failed with gopter seed %d (status %s):\n%s\nreplay: %s=%d go test -run '%s'",
		name, seed, res.Status, buf.String(), ConformanceSeedEnv, seed, confRunPattern(t.Name()))
}
