package worker

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/strictjson/jsontest"
)

// randomSpec fills every field of a spec at random (each left zero a
// third of the time), but for the service, whose spec is left to
// encoding/json; its fault actions are ones that parse.
func randomSpec(rng *rand.Rand) WorkerSpec {
	var s WorkerSpec
	v := reflect.ValueOf(&s).Elem()
	for i := range v.NumField() {
		if v.Type().Field(i).Name != "Service" {
			jsontest.Fill(rng, v.Field(i), 1)
		}
	}
	if s.Arms != nil {
		s.Arms = faults.Arms{}
		for range rng.IntN(3) {
			p := faults.Point(jsontest.Awkward[rng.IntN(len(jsontest.Awkward))])
			a, err := faults.ParseAction([]string{"crash", "crash@2", "pause:1500@1", "torn-write:512", "expire"}[rng.IntN(5)])
			if err != nil {
				panic(err)
			}
			s.Arms[p] = a
		}
	}
	return s
}

// decodeSpec, a worker's fast path, reads every spec the supervisor
// writes (json.Marshal) and reads it as json.Unmarshal does; on anything
// else (a torn prefix, a damaged copy, white space, an unknown, repeated
// or differently cased key, null, a fault action that does not parse, a
// service) it gives up, and ReadWorkerSpec's answer, spec or error, is
// json.Unmarshal's.
func TestDecodeSpecMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	dir := t.TempDir()
	agree := func(i int, b []byte, mustDecode bool) {
		t.Helper()
		slow, err := jsontest.Agree(t, fmt.Sprintf("spec %d", i), b, mustDecode, decodeSpec)
		path := filepath.Join(dir, "spec.json")
		if werr := os.WriteFile(path, b, 0o644); werr != nil {
			t.Fatal(werr)
		}
		got, rerr := ReadWorkerSpec(path)
		switch {
		case err != nil && (rerr == nil || !strings.Contains(rerr.Error(), err.Error())):
			t.Fatalf("spec %d: json.Unmarshal refuses it (%v), ReadWorkerSpec says %v: %q", i, err, rerr, b)
		case err == nil && (rerr != nil || !reflect.DeepEqual(got, slow)):
			t.Fatalf("spec %d: ReadWorkerSpec %+v (%v), json.Unmarshal %+v: %q", i, got, rerr, slow, b)
		}
	}
	for i := range 2000 {
		s := randomSpec(rng)
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		agree(i, b, true)
		agree(i, b[:rng.IntN(len(b))], false)
		for range 4 {
			agree(i, jsontest.Damage(rng, b), false)
		}
	}
	withService, err := json.Marshal(WorkerSpec{Case: "c", Service: &ServiceSpec{Command: "svc"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`{"case":"a","phase":1,"case":"b"}`, `{"Case":"a"}`, `{"case":"a","x":1}`, ` {"case":"a"}`, `{"case":"a","phase":1.0}`,
		`{"case":"a","actions":null}`, `{"case":"a","arms":{"p":"no-such-fault"}}`, `{"case":"a","arms":{"p":"crash","p":"crash@2"}}`,
		`{"case":"a","backend":{"name":"sqlite","args":{"k":"v","k":"w"}}}`, `{"case":"a","env":{"dir":"d","servers":{}}}`,
		`{"case":"a","actions":[{"do":"ingest","approve":true}],"bugs":[]}`, `{"case":"a","seed":99999999999999999999}`,
		`{"case":"a","phase":"1"}`, `{"case":"a"} x`, string(withService)} {
		agree(-1, []byte(s), false)
	}
	var s WorkerSpec
	if decodeSpec(withService, &s) {
		t.Fatal("decodeSpec read a service spec: it is json.Unmarshal's")
	}
}
