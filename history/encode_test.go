package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/strictjson/jsontest"
	"github.com/crashmatrix/crashmatrix/reference"
)

// appendRecord must write what json.Marshal writes, byte for byte: the
// readers, reports and torn-record detection read histories with
// encoding/json. Every field of Record and of what it points to is filled
// by reflection (so a field added later without its encoding fails here),
// each left zero a third of the time, with strings that need every kind
// of escape.
func TestAppendRecordIsJSONMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		var r Record
		jsontest.Fill(rng, reflect.ValueOf(&r).Elem(), 0)
		want, werr := json.Marshal(r)
		got, gerr := appendRecord(nil, &r)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("record %d: json.Marshal error %v, appendRecord error %v", i, werr, gerr)
		}
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("record %d:\nappendRecord %s\njson.Marshal %s", i, got, want)
		}
	}
	// Zero pointed-to values still appear, as {}.
	r := Record{Result: &Outcome{}, Obs: &Observation{}, Event: &reference.Event{}}
	want, _ := json.Marshal(r)
	if got, _ := appendRecord(nil, &r); !bytes.Equal(got, want) {
		t.Fatalf("zero values:\nappendRecord %s\njson.Marshal %s", got, want)
	}
}

// decodeRecord, the supervisor's fast path, reads every record the
// writer writes and reads it as json.Unmarshal does; on anything else
// (a torn prefix, a damaged copy) it either gives up, for json.Unmarshal
// to have its say, or agrees with json.Unmarshal.
func TestDecodeRecordIsJSONUnmarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	agree := func(i int, b []byte, mustDecode bool) {
		t.Helper()
		jsontest.Agree(t, fmt.Sprintf("record %d", i), b, mustDecode, decodeRecord)
	}
	for i := range 3000 {
		var r Record
		jsontest.Fill(rng, reflect.ValueOf(&r).Elem(), 0)
		if r.Fault != nil && r.Fault.Kind == "" {
			r.Fault = nil // the writer panics on it
		}
		if r.Fault != nil {
			if _, err := r.Fault.MarshalText(); err != nil {
				r.Fault = nil
			}
		}
		b, err := appendRecord(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		var back Record
		if json.Unmarshal(b, &back) != nil {
			continue // a fault text ParseAction refuses: json.Unmarshal fails too
		}
		agree(i, b, true)
		agree(i, b[:rng.IntN(len(b))], false)
		for range 4 {
			agree(i, jsontest.Damage(rng, b), false)
		}
	}
	for _, s := range []string{`{"w":"a","phase":1,"w":"b"}`, `{"w":"a","ev":{"kind":"x","at":1},"ev":{"at":2}}`, "{\"w\":\"a\x01\"}", `{"W":"a","phase":1}`, `{"w":"a","phase":1,"x":2}`, ` {"w":"a","phase":1}`,
		`{"w":"a","phase":01}`, `{"w":"a","phase":1.0}`, `{"w":"a","ev":null}`, `{"w":"a","ev":{"batch":null,"at":1}}`,
		`{"w":"\ud83d\ude00","phase":1}`, `{"w":"a\u0041\n","phase":-0}`, `{"w":"a","obs":{"what":"x","items":[]}}`,
		`{"w":"a","phase":99999999999999999999}`, `{"w":"a","ev":{"batch":{"operationId":"x","upsertNodes":[{"id":"n","label":"L","properties":{"k":"v"}}]},"at":2}}`} {
		agree(-1, []byte(s), false)
	}
}
