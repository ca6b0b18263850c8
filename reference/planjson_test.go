package reference

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/strictjson"
	"github.com/crashmatrix/crashmatrix/internal/strictjson/jsontest"
)

// sameJSON fails unless got is json.Marshal's rendering of v.
func sameJSON(t *testing.T, what string, got []byte, v any) {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s:\nours         %s\njson.Marshal %s", what, got, want)
	}
}

// The stored plan, state, mutation and properties, written without
// reflection, are json.Marshal's bytes: random values of every field
// (jsontest.Fill: a field added later without its encoding fails here;
// each left zero a third of the time; strings needing every escape), and
// a plan read back from them is the plan json.Marshal's bytes give.
func TestPlanJSONIsJSONMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	same := func(what string, got []byte, v any) { t.Helper(); sameJSON(t, what, got, v) }
	for range 3000 {
		var p Plan
		jsontest.Fill(rng, reflect.ValueOf(&p).Elem(), 0)
		b := appendPlan(nil, &p)
		same("plan", b, p)
		var back, viaJSON Plan
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(p)
		if err := json.Unmarshal(want, &viaJSON); err != nil || !reflect.DeepEqual(back, viaJSON) {
			t.Fatalf("plan read back: %+v, want %+v (%v)", back, viaJSON, err)
		}
		var s DocumentState
		jsontest.Fill(rng, reflect.ValueOf(&s).Elem(), 0)
		same("state", appendState(nil, &s), s)
		var m Mutation
		jsontest.Fill(rng, reflect.ValueOf(&m).Elem(), 0)
		same("mutation", AppendMutation(nil, &m), m)
		props := map[string]string{}
		jsontest.Fill(rng, reflect.ValueOf(&props).Elem(), 1)
		same("properties", strictjson.AppendStringMap(nil, props), props)
	}
	// Zero values and empty, non-nil slices and maps.
	zero := Plan{NextState: &DocumentState{FactSources: []EdgeKey{}, NodeIDs: []string{}}, StaleEdges: []EdgeKey{},
		Options: GraphOptions{Attributes: map[string]string{}}, Mutation: Mutation{DeleteNodes: []string{}}}
	same("zero plan", appendPlan(nil, &zero), zero)
	same("nil map", strictjson.AppendStringMap(nil, nil), map[string]string(nil))
	same("nil strings", strictjson.AppendStrings(nil, nil), []string(nil))
}

// readPlan and readStateBytes, the readers' fast paths, read every plan
// and state the writer writes and read them as encoding/json does; on
// anything else (a torn prefix, a damaged copy, null, white space, an
// unknown or recased key) they either give up, for encoding/json to have
// its say, or agree with it. DecodePlan's answer is the same either way.
func TestReadPlanIsJSONUnmarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range 2000 {
		var p Plan
		jsontest.Fill(rng, reflect.ValueOf(&p).Elem(), 0)
		b := appendPlan(nil, &p)
		what := fmt.Sprintf("plan %d", i)
		jsontest.Agree(t, what, b, true, readPlan)
		jsontest.Agree(t, what, b[:rng.IntN(len(b))], false, readPlan)
		for range 3 {
			jsontest.Agree(t, what, jsontest.Damage(rng, b), false, readPlan)
		}
		var s DocumentState
		jsontest.Fill(rng, reflect.ValueOf(&s).Elem(), 0)
		b = appendState(nil, &s)
		jsontest.Agree(t, what, b, true, readStateBytes)
		jsontest.Agree(t, what, jsontest.Damage(rng, b), false, readStateBytes)
	}
	for _, s := range []string{`{"kind":"ingest","kind":"retract"}`, `{"Kind":"ingest"}`, `{"kind":"ingest","x":1}`, ` {"kind":"ingest"}`,
		`{"kind":"ingest","nextState":null}`, `{"kind":"ingest","mutation":{"upsertNodes":[{"id":"a","properties":{"k":"1","k":"2"}}]}}`,
		`{"kind":"ingest","extractionCall":1.5}`, `{"kind":"ingest"}{}`, `{"kind":"ingest","staleEdges":[]}`} {
		jsontest.Agree(t, s, []byte(s), false, readPlan)
	}
	// A valid plan decodes the same through the fast path and encoding/json.
	p := Plan{Kind: Ingestion, OperationID: "sp/op", Space: "sp", DocumentID: "d", Options: GraphOptions{Space: "sp"},
		Mutation:  Mutation{OperationID: "sp/op", UpsertNodes: []NodeUpsert{{ID: "n", Label: "L"}}},
		NextState: &DocumentState{Space: "sp", DocumentID: "d", Revision: 1, OperationID: "sp/op", Status: DocActive, NodeIDs: []string{"n"}}}
	if err := p.Validate(); err != nil {
		t.Fatalf("the test's plan: %v", err)
	}
	b := appendPlan(nil, &p)
	fast, err := decodePlan(b)
	spaced, serr := decodePlan(append([]byte(" "), b...)) // white space: encoding/json's path
	if err != nil || serr != nil || !reflect.DeepEqual(fast, spaced) || !reflect.DeepEqual(fast, p) {
		t.Fatalf("decodePlan: fast %+v (%v), encoding/json %+v (%v), want %+v", fast, err, spaced, serr, p)
	}
}
