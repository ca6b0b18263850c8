package scenarios_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// A durable-step case of the sweep is written as a scenario naming the
// fault (point durableStep, the store call, its hit, the step), and the
// file reads back to the same kill: the same call, step and power cut,
// torn at sectors for the torn-write variant; a server's kill after the
// last step of its call (1 of 1) too, and its torn power cut.
func TestDurableStepKillRoundTrips(t *testing.T) {
	base := catalogue.DurableKill{Call: 8, Method: "ops.create", Hit: 2, Step: 1, Steps: 2, Op: "fdatasync"}
	for _, tc := range []struct {
		kill catalogue.DurableKill
		want string
	}{
		{base, "{point: durableStep, kind: crash, hit: 2, call: ops.create, step: 1, of: 2, syscall: fdatasync}"},
		{func() catalogue.DurableKill { k := base; k.Power = true; return k }(), "{point: durableStep, kind: power-loss, hit: 2, call: ops.create, step: 1, of: 2, syscall: fdatasync}"},
		{func() catalogue.DurableKill { k := base; k.Power, k.Tear = true, faults.TearSector; return k }(), "{point: durableStep, kind: torn-write, hit: 2, tear: 512, call: ops.create, step: 1, of: 2, syscall: fdatasync}"},
		{func() catalogue.DurableKill { k := base; k.Steps, k.Server = 1, "postgres"; return k }(), "{point: durableStep, kind: crash, hit: 2, server: postgres, call: ops.create, step: 1, of: 1, syscall: fdatasync}"},
		{func() catalogue.DurableKill {
			k := base
			k.Steps, k.Server, k.Power, k.Tear = 1, "postgres", true, faults.TearSector
			return k
		}(), "{point: durableStep, kind: torn-write, hit: 2, server: postgres, tear: 512, call: ops.create, step: 1, of: 1, syscall: fdatasync}"},
	} {
		k := tc.kill
		c := catalogue.DurableStepCase(k)
		if k.Server != "" {
			c = catalogue.ServerDurableCase(k)
		}
		sc, err := scenarios.FromCase(c)
		if err != nil {
			t.Fatalf("FromCase of %s: %v", c.ID, err)
		}
		sc.Expect = scenarios.Expect{Verdict: scenarios.ExpectFail, Breaks: []check.Invariant{check.I5}}
		text, err := sc.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), tc.want) {
			t.Fatalf("the scenario of %s does not name the kill as %s:\n%s", c.ID, tc.want, text)
		}
		back, err := scenarios.Parse(c.ID+".yaml", text)
		if err != nil {
			t.Fatalf("%v\n%s", err, text)
		}
		got := back.Case().Steps[0]
		wantK := k
		wantK.Call = 0 // the call number is the probe's; the file names the method's call
		if got.Durable == nil || !reflect.DeepEqual(*got.Durable, wantK) {
			t.Fatalf("read back, the kill is %+v, want %+v", got.Durable, wantK)
		}
		if len(got.Arms) != 0 || len(got.ExpectHit) != 0 {
			t.Fatalf("the kill became a failpoint the worker must hit: arms %v, expectHit %v", got.Arms, got.ExpectHit)
		}
	}
}

// A durable-step kill counted only by the worker's store call number is
// not written: that number moves when calls without a durable step come
// and go, and a file that replays a different kill is worse than none.
func TestFromCaseRefusesADurableKillWithoutItsMethodsCall(t *testing.T) {
	c := catalogue.DurableStepCase(catalogue.DurableKill{Call: 8, Method: "ops.create", Step: 1, Steps: 2, Op: "fdatasync"})
	if _, err := scenarios.FromCase(c); err == nil || !strings.Contains(err.Error(), "ops.create after fdatasync 1 of 2") {
		t.Fatalf("FromCase of %s: %v, want an error naming the step", c.ID, err)
	}
}

// Bad durable-step faults are refused with the field that is wrong.
func TestBadDurableStepFaults(t *testing.T) {
	const head = "name: d\nsteps:\n  - worker: fault\n    actions:\n      - {do: recover}\n"
	const tail = "  - worker: quiesce\n    actions:\n      - {do: recover}\nexpect:\n  verdict: pass\n"
	for _, tc := range []struct{ fault, step, want string }{
		{"{point: durableStep, kind: crash, step: 1}", "", "steps[0].faults[0].call: required"},
		{"{point: durableStep, kind: crash, call: ops.nope, step: 1}", "", `steps[0].faults[0].call: unknown store call "ops.nope"`},
		{"{point: durableStep, kind: crash, call: ops.create}", "", "steps[0].faults[0].step: required"},
		{"{point: durableStep, kind: crash, call: ops.create, step: 0}", "", "step must be 1 or more"},
		{"{point: durableStep, kind: crash, call: ops.create, step: 2, of: 2}", "", "steps[0].faults[0].of: of (the durable steps the call took) must be more than step 2"},
		{"{point: durableStep, kind: crash, call: ops.create, hit: 0, step: 1}", "", "steps[0].faults[0].hit: hit must be a 1-based number"},
		{"{point: durableStep, kind: pause, pause: 1s, call: ops.create, step: 1}", "", "kind pause does not apply at durableStep"},
		{"{point: beforeGraphWrite, kind: crash, step: 1}", "", "steps[0].faults[0].step: step applies to point durableStep only"},
		{"{point: durableStep, kind: crash, call: ops.create, step: 1}", "    kill: {seed: 1, offset: 5ms}\n", "steps[0].faults: a step killed after a durable step runs in the foreground and has no kill block"},
	} {
		src := head + "    faults:\n      - " + tc.fault + "\n" + tc.step + tail
		_, err := scenarios.Parse("d.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.fault, err, tc.want)
		}
	}
	for _, tc := range []struct{ fault, want string }{
		{"{point: durableStep, kind: crash, server: mysql, call: ops.create, step: 1}", `steps[0].faults[0].server: unknown server "mysql"`},
		{"{point: durableStep, kind: slow-sync, server: postgres, call: ops.create, step: 1}", "steps[0].faults[0].kind: kind slow-sync does not apply at durableStep"},
	} {
		if _, err := scenarios.Parse("d.yaml", []byte(head+"    faults:\n      - "+tc.fault+"\n"+tail)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.fault, err, tc.want)
		}
	}
	srv := head + "    faults:\n      - {point: durableStep, kind: crash, server: postgres, call: states.cas, hit: 2, step: 1}\n" + tail
	s, err := scenarios.Parse("d.yaml", []byte(srv))
	if err != nil {
		t.Fatal(err)
	}
	if d := s.Case().Steps[0].Durable; d == nil || *d != (catalogue.DurableKill{Method: "states.cas", Hit: 2, Step: 1, Server: "postgres"}) {
		t.Fatalf("the server's kill read as %+v", d)
	}
	if text, err := s.Marshal(); err != nil || !strings.Contains(string(text), "{point: durableStep, kind: crash, hit: 2, server: postgres, call: states.cas, step: 1}") {
		t.Fatalf("the server's kill written as %v:\n%s", err, text)
	}
	ok := head + "    faults:\n      - {point: durableStep, kind: power-loss, call: ops.create, step: 1}\n" + tail
	s, err = scenarios.Parse("d.yaml", []byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if d := s.Case().Steps[0].Durable; d == nil || *d != (catalogue.DurableKill{Method: "ops.create", Hit: 1, Step: 1, Power: true}) || s.Steps[0].Faults[0].Kind != faults.PowerLoss {
		t.Fatalf("the kill read as %+v", d)
	}
}

// A durable-step kill inside a System B store call belongs in a System B
// scenario, and one inside System A's in an ingestion scenario.
func TestDurableStepKillOfSystemB(t *testing.T) {
	c := catalogue.DurableStepCase(catalogue.DurableKill{Call: 4, Method: "plans.save", Hit: 1, Step: 1, Steps: 2, Op: "fsync"})
	sc, err := scenarios.FromCase(c)
	if err != nil {
		t.Fatal(err)
	}
	sc.Expect = scenarios.Expect{Verdict: scenarios.ExpectFail, Breaks: []check.Invariant{check.I8}}
	text, err := sc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := scenarios.Parse(c.ID+".yaml", text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if got := back.Case(); got.System != faults.PlanSave || got.Steps[0].Durable == nil || got.Steps[0].Durable.Method != "plans.save" {
		t.Fatalf("read back: system %s, kill %+v", got.System, got.Steps[0].Durable)
	}
	bad := strings.Replace(string(text), "system: plansave\n", "", 1)
	if _, err := scenarios.Parse("b.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "point durableStep at store call plans.save belongs to system plansave, the scenario is ingestion") {
		t.Fatalf("a System B call's kill in an ingestion scenario: %v", err)
	}
}
