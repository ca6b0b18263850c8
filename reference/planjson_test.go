package reference

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/strictjson"
	"github.com/crashmatrix/crashmatrix/internal/strictjson/jsontest"
)

// The stored plan, state, mutation and properties, written without
// reflection, are json.Marshal's bytes, and the readers' fast paths read
// them as encoding/json does (jsontest.RoundTrip: random values of every
// field, so a field added later without its encoding fails here; torn
// and damaged copies given up on or read alike); on anything else (null,
// white space, an unknown or recased key) they give up, for
// encoding/json to have its say. DecodePlan's answer is the same either
// way.
func TestPlanJSONIsEncodingJSON(t *testing.T) {
	jsontest.RoundTrip(t, 7, 2000, appendPlan, readPlan)
	jsontest.RoundTrip(t, 9, 2000, appendState, readStateBytes)
	jsontest.RoundTrip(t, 11, 2000, AppendMutation, func(b []byte, m *Mutation) bool {
		d := &strictjson.Decoder{B: b}
		return ReadMutation(d, m) && d.I == len(b)
	})
	jsontest.RoundTrip(t, 13, 2000, func(b []byte, m *map[string]string) []byte { return strictjson.AppendStringMap(b, *m) }, nil)
	// Zero values and empty, non-nil slices and maps.
	zero := Plan{NextState: &DocumentState{FactSources: []EdgeKey{}, NodeIDs: []string{}}, StaleEdges: []EdgeKey{},
		Options: GraphOptions{Attributes: map[string]string{}}, Mutation: Mutation{DeleteNodes: []string{}}}
	for _, c := range []struct {
		got []byte
		v   any
	}{{appendPlan(nil, &zero), zero}, {strictjson.AppendStringMap(nil, nil), map[string]string(nil)}, {strictjson.AppendStrings(nil, nil), []string(nil)}} {
		if want, _ := json.Marshal(c.v); string(c.got) != string(want) {
			t.Fatalf("written %s, json.Marshal %s", c.got, want)
		}
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
