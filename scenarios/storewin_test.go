package scenarios

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

const killScenario = `name: random-kill-7
system: ingestion
documents:
  d4: |
    Person:Frank {team=graph} -MANAGES-> Person:Grace
steps:
  - worker: fault
    actions:
      - {do: ingest, doc: d4, document: d4}
    faults:
      - {point: mystore/afterOperationRow, kind: unknown}
    expectHit: []
    kill: {seed: 7, offset: 12.345ms, base: 40ms}
  - worker: quiesce
    actions:
      - {do: recover}
    resubmit: [fault]
    continueOnError: true
expect:
  verdict: fail
  breaks: [I5]
`

// A random-instant kill and a store-declared window survive the trip
// file -> scenario -> case and back.
func TestScenarioKillAndStoreWindow(t *testing.T) {
	s, err := Parse("k.yaml", []byte(killScenario))
	if err != nil {
		t.Fatal(err)
	}
	st := s.Steps[0]
	want := &catalogue.RandomKill{Seed: 7, Offset: 12345 * time.Microsecond, Base: 40 * time.Millisecond}
	if !reflect.DeepEqual(st.Kill, want) || len(st.Faults) != 1 || st.Faults[0].Point != "mystore/afterOperationRow" || st.Faults[0].Kind != faults.Unknown {
		t.Fatalf("decoded step %+v (kill %+v), want the kill %+v and an unknown at mystore/afterOperationRow", st, st.Kill, want)
	}
	c := s.Case()
	if !reflect.DeepEqual(c.Steps[0].Kill, want) || c.Steps[0].Arms["mystore/afterOperationRow"].Kind != faults.Unknown {
		t.Fatalf("case step %+v: kill or store arm lost", c.Steps[0])
	}
	back, err := FromCase(c)
	if err != nil {
		t.Fatal(err)
	}
	back.Expect = s.Expect
	text, err := back.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "kill: {seed: 7, offset: 12.345ms, base: 40ms}") {
		t.Fatalf("marshalled scenario has no kill line:\n%s", text)
	}
	// An anchored kill (what certify writes for a kill that fired).
	back.Steps[0].Kill = &catalogue.RandomKill{Seed: 7, Offset: 12345 * time.Microsecond, After: "fault event  model-call d4 ingest-… > rev=0 exp=0 tok=0", AfterIndex: 2, Delta: 140 * time.Microsecond}
	text, err = back.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("k.yaml", text)
	if err != nil || !reflect.DeepEqual(again.Steps[0].Kill, back.Steps[0].Kill) {
		t.Fatalf("anchored kill does not round-trip: %v\n%s", err, text)
	}
}

func TestScenarioKillErrors(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{"kill: {seed: 7, offset: 12.345ms, base: 40ms}", "kill: {seed: 7}", "steps[0].kill.offset: required"},
		{"offset: 12.345ms", "offset: 12.3456789ms", "steps[0].kill.offset: duration \"12.3456789ms\" is finer than a microsecond"},
		{"offset: 12.345ms", "offset: -3ms", "steps[0].kill.offset: bad duration"},
		{"base: 40ms", "base: 10ms", "steps[0].kill.offset: offset 12.345ms is beyond base 10ms"},
		{"base: 40ms}", "base: 40ms, at: 3}", "steps[0].kill"},
		{"continueOnError: true\nexpect", "continueOnError: true\n    kill: {offset: 1ms}\nexpect", "steps[1].kill: the quiesce step is not killed"},
		{"mystore/afterOperationRow", "mystore/after/row", "steps[0].faults[0].point"},
		{"kind: unknown}", "kind: permanent}", "kind permanent does not apply at mystore/afterOperationRow"},
		{"base: 40ms}", "base: 40ms, after: x}", "steps[0].kill.afterIndex: required with after"},
		{"base: 40ms}", "base: 40ms, after: x, afterIndex: 1, delta: 1.5us}", "steps[0].kill.delta: want how long"},
	} {
		src := strings.Replace(killScenario, tc.old, tc.new, 1)
		if src == killScenario {
			t.Fatalf("test edit %q not applied", tc.old)
		}
		_, err := Parse("k.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s -> %s: error %v, want it to contain %q", tc.old, tc.new, err, tc.want)
		}
	}
}
