// Package jsontest fills values at random for the tests that hold a
// hand-written JSON encoder or reader to encoding/json (history's
// records, a worker's spec), and damages encoded bytes.
package jsontest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// Awkward are the strings Fill draws from: every kind of escape, bytes
// that are not UTF-8, JSON's own punctuation.
var Awkward = []string{"", "a", "w", `"`, `\`, "<", ">", "&", "\x00", "\x1f", "\b", "\f", "\n", "\r", "\t", "\x7f",
	"é", "日本", "\u2028", "\u2029", "\xff", "\xe2\x82", "😀", `{"w":"`, "crash", "pause"}

// Fill sets v, at random, field by field (exported fields), each left
// zero a third of the time below the top (depth > 0); strings are made of
// Awkward ones. It panics on a kind it has no case for.
func Fill(rng *rand.Rand, v reflect.Value, depth int) {
	if rng.IntN(3) == 0 && depth > 0 {
		return // the zero value
	}
	switch v.Kind() {
	case reflect.String:
		var s string
		for range rng.IntN(4) {
			s += Awkward[rng.IntN(len(Awkward))]
		}
		v.SetString(s)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(rng.Int64N(1<<40) - 1<<39)
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		Fill(rng, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				Fill(rng, v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		n := rng.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			Fill(rng, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range rng.IntN(3) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			Fill(rng, k, depth+1)
			Fill(rng, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	default:
		panic("fill: no case for " + v.Kind().String())
	}
}

// Damage returns a copy of b (not empty) with one byte replaced by a
// JSON-significant or invalid one, removed, or repeated elsewhere.
func Damage(rng *rand.Rand, b []byte) []byte {
	c := append([]byte(nil), b...)
	switch k := rng.IntN(len(c)); rng.IntN(3) {
	case 0:
		const junk = " \"\\{}[],:0-9etnul\x00\x01\x1f\xff"
		c[k] = junk[rng.IntN(len(junk))]
	case 1:
		c = append(c[:k], c[k+1:]...)
	default:
		c = append(c[:k], append([]byte{c[rng.IntN(len(c))]}, c[k:]...)...)
	}
	return c
}

// Agree holds fast, a reader of the strict subset of JSON that gives up
// (false) on anything else, to json.Unmarshal on b: it must read b when
// mustDecode (what the writer wrote), and whatever it reads it must read
// as json.Unmarshal does. It returns json.Unmarshal's value and error.
func Agree[T any](t testing.TB, what string, b []byte, mustDecode bool, fast func([]byte, *T) bool) (T, error) {
	t.Helper()
	var quick, slow T
	ok := fast(b, &quick)
	err := json.Unmarshal(b, &slow)
	switch {
	case mustDecode && !ok:
		t.Fatalf("%s: the fast reader gave up on what the writer wrote: %s", what, b)
	case ok && err != nil:
		t.Fatalf("%s: the fast reader read what json.Unmarshal refuses (%v): %q", what, err, b)
	case ok && !reflect.DeepEqual(quick, slow):
		t.Fatalf("%s: %q\nfast reader    %+v\njson.Unmarshal %+v", what, b, quick, slow)
	}
	return slow, err
}

// RoundTrip holds a writer and a reader of T to encoding/json on n
// random values (Fill, from seed): write must give json.Marshal's bytes,
// read must read them (as json.Unmarshal does, Agree), and on a prefix
// and on damaged copies it must give up or agree. A nil read is not
// checked.
func RoundTrip[T any](t *testing.T, seed uint64, n int, write func([]byte, *T) []byte, read func([]byte, *T) bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for i := range n {
		var v T
		Fill(rng, reflect.ValueOf(&v).Elem(), 0)
		b := write(nil, &v)
		want, err := json.Marshal(v)
		if err != nil || !bytes.Equal(b, want) {
			t.Fatalf("%T %d:\nwritten      %s\njson.Marshal %s (%v)", v, i, b, want, err)
		}
		if read == nil {
			continue
		}
		what := fmt.Sprintf("%T %d", v, i)
		Agree(t, what, b, true, read)
		Agree(t, what, b[:rng.IntN(len(b))], false, read)
		for range 3 {
			Agree(t, what, Damage(rng, b), false, read)
		}
	}
}
