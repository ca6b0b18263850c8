package worker

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/strictjson/jsontest"
)

// A stop line is written as json.Marshal writes it and read, when it is
// in that form, as json.Unmarshal reads it; a torn or damaged line is
// either given up on (json.Unmarshal's) or read alike.
func TestStopLineIsJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for i := range 2000 {
		var l StopLine
		jsontest.Fill(rng, reflect.ValueOf(&l).Elem(), 0)
		b := appendStopLine(nil, &l)
		if want, _ := json.Marshal(l); string(b) != string(want) {
			t.Fatalf("appendStopLine %s, json.Marshal %s", b, want)
		}
		what := fmt.Sprintf("line %d", i)
		jsontest.Agree(t, what, b, true, readStopLine)
		jsontest.Agree(t, what, b[:rng.IntN(len(b))], false, readStopLine)
		jsontest.Agree(t, what, jsontest.Damage(rng, b), false, readStopLine)
	}
}
