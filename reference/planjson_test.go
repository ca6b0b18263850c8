package reference

import (
	"bytes"
	"encoding/json"
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
