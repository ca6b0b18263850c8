package history

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

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
		fill(rng, reflect.ValueOf(&r).Elem(), 0)
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

var awkward = []string{"", "a", "w", `"`, `\`, "<", ">", "&", "\x00", "\x1f", "\b", "\f", "\n", "\r", "\t", "\x7f",
	"é", "日本", "\u2028", "\u2029", "\xff", "\xe2\x82", "😀", `{"w":"`, "crash", "pause"}

func fill(rng *rand.Rand, v reflect.Value, depth int) {
	if rng.IntN(3) == 0 && depth > 0 {
		return // the zero value
	}
	switch v.Kind() {
	case reflect.String:
		var s string
		for range rng.IntN(4) {
			s += awkward[rng.IntN(len(awkward))]
		}
		v.SetString(s)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(rng.Int64N(1<<40) - 1<<39)
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(rng, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(rng, v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		n := rng.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(rng, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range rng.IntN(3) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(rng, k, depth+1)
			fill(rng, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	default:
		panic("fill: no case for " + v.Kind().String())
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
		var fast, slow Record
		ok := decodeRecord(b, &fast)
		err := json.Unmarshal(b, &slow)
		switch {
		case mustDecode && !ok:
			t.Fatalf("record %d: decodeRecord gave up on what the writer wrote: %s", i, b)
		case ok && err != nil:
			t.Fatalf("record %d: decodeRecord read what json.Unmarshal refuses (%v): %q", i, err, b)
		case ok && !reflect.DeepEqual(fast, slow):
			t.Fatalf("record %d: %q\ndecodeRecord   %+v\njson.Unmarshal %+v", i, b, fast, slow)
		}
	}
	for i := range 3000 {
		var r Record
		fill(rng, reflect.ValueOf(&r).Elem(), 0)
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
			c := bytes.Clone(b)
			switch k := rng.IntN(len(c)); rng.IntN(3) {
			case 0:
				const junk = " \"\\{}[],:0-9etnul\x00\x01\x1f\xff"
				c[k] = junk[rng.IntN(len(junk))]
			case 1:
				c = append(c[:k], c[k+1:]...)
			default:
				c = append(c[:k], append([]byte{c[rng.IntN(len(c))]}, c[k:]...)...)
			}
			agree(i, c, false)
		}
	}
	for _, s := range []string{`{"w":"a","phase":1,"w":"b"}`, `{"w":"a","ev":{"kind":"x","at":1},"ev":{"at":2}}`, "{\"w\":\"a\x01\"}", `{"W":"a","phase":1}`, `{"w":"a","phase":1,"x":2}`, ` {"w":"a","phase":1}`,
		`{"w":"a","phase":01}`, `{"w":"a","phase":1.0}`, `{"w":"a","ev":null}`, `{"w":"a","ev":{"batch":null,"at":1}}`,
		`{"w":"\ud83d\ude00","phase":1}`, `{"w":"a\u0041\n","phase":-0}`, `{"w":"a","obs":{"what":"x","items":[]}}`,
		`{"w":"a","phase":99999999999999999999}`, `{"w":"a","ev":{"batch":{"operationId":"x","upsertNodes":[{"id":"n","label":"L","properties":{"k":"v"}}]},"at":2}}`} {
		agree(-1, []byte(s), false)
	}
}
