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
