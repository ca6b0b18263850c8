package sqlcore

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/strictjson/jsontest"
)

// EncodeProps writes what json.Marshal writes ("{}" for none), and
// DecodeProps reads it, and anything else, as json.Unmarshal does: its
// map, or an error where json.Unmarshal gives one.
func TestPropsAreJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for range 2000 {
		m := map[string]string{}
		jsontest.Fill(rng, reflect.ValueOf(&m).Elem(), 1)
		s, err := EncodeProps(m)
		want, _ := json.Marshal(m)
		if err != nil || s != string(want) {
			t.Fatalf("EncodeProps %q (%v), json.Marshal %q", s, err, want)
		}
		for _, in := range []string{s, s[:rng.IntN(len(s))], string(jsontest.Damage(rng, []byte(s)))} {
			got, err := DecodeProps(in)
			slow := map[string]string{}
			serr := json.Unmarshal([]byte(in), &slow)
			if in == "" || (serr == nil && slow == nil) {
				slow, serr = map[string]string{}, nil // DecodeProps's own: no properties ("", null)
			}
			if (err != nil) != (serr != nil) || (err == nil && !reflect.DeepEqual(got, slow)) {
				t.Fatalf("DecodeProps(%q) = %v (%v), json.Unmarshal %v (%v)", in, got, err, slow, serr)
			}
		}
	}
	if s, err := EncodeProps(nil); s != "{}" || err != nil {
		t.Fatalf("EncodeProps(nil) = %q, %v", s, err)
	}
}
