package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc/refservice"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/internal/certifyrun"
	"github.com/crashmatrix/crashmatrix/internal/scenariorun"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The durable-step sweep on a service's own files: the reference keeping
// its stores in SQLite files of its own (--own-stores), reporting each
// call to them (call, done), while the harness watches the case's lazy
// mount. The worker marks the reported call as the one it is in while the
// service makes it, so the probe counts the service's own WAL syncs per
// call. The broken variant (refservice.BugTwoTransactionCreate: the
// operation row and its plan in two synced transactions, no window
// declared) takes two in ops.create, and each case killed (and the power
// cut, whole or torn) right after the first is caught (I5); the correct
// service takes one, has no case of its own, and passes the broken
// variant's cases, its kill fired right after its one sync; a kill after
// a step the call never takes is not exercised, never a pass.
func TestOwnStoresDurableStepSweep(t *testing.T) {
	sweepOwnCall(t, ownSweepCase{method: "ops.create", bug: refservice.BugTwoTransactionCreate, invariant: "I5", file: "data/service/service.db-wal"})
}

// The same on System B, the service's own plan and checkpoint files: the
// probe runs System B's script (probe-durable-plansave) through the
// service, which reports its checkpoints.* and plans.* calls. The broken
// variant (refservice.BugTwoTransactionPlanSave: a plan row and its
// (owner, operation_id) key in two synced transactions, no window
// declared) takes two steps in plans.save, and each case killed, cut or
// torn right after the first is caught (I8: the resumed save finds no key
// and inserts a second row); the correct service's plans.save syncs once,
// passes those cases, and its second sync is not exercised.
func TestOwnStoresDurableStepSweepSystemB(t *testing.T) {
	sweepOwnCall(t, ownSweepCase{method: "plans.save", bug: refservice.BugTwoTransactionPlanSave, invariant: "I8", file: "data/service/plans.db-wal"})
}

// ownSweepCase is a two-step own-store call and the variant that takes it.
type ownSweepCase struct {
	method, bug, invariant string
	// file is the one the correct service syncs in the call.
	file string
}

// sweepOwnCall: the broken variant's call w.method takes two durable
// steps, the sweep has a kill, a power loss and a torn write after the
// first, each caught (w.invariant); the correct service takes one step,
// has no case, passes the variant's cases (the kill fired after its one
// sync of w.file), and a kill after a second step is not exercised.
func sweepOwnCall(t *testing.T, w ownSweepCase) {
	needLazyMount(t)
	steps := func(calls []catalogue.DurableCall) (n []int) {
		for _, c := range calls {
			if c.Method == w.method {
				n = append(n, len(c.Ops))
			}
		}
		return n
	}

	broken := runnerOwn(t, reference.Bug(w.bug))
	cases, calls := ownSweep(t, broken)
	if n := steps(calls); len(n) == 0 || n[0] != 2 {
		t.Fatalf("the broken service's %s took durable steps %v, want 2 (the probe saw %+v)", w.method, n, calls)
	}
	if len(cases) != 3 || cases[0].Kind != faults.Crash || cases[1].Kind != faults.PowerLoss || cases[2].Kind != faults.TornWrite {
		t.Fatalf("sweep of the broken service: %d cases, want a crash, a power loss and a torn write after %s's first sync", len(cases), w.method)
	}
	row := w.method + " after fsync 1 of 2"
	for _, c := range cases {
		if k := c.Steps[0].Durable; k.Method != w.method || k.Step != 1 || k.Steps != 2 || !strings.HasPrefix(c.Description, row) {
			t.Fatalf("%s: kill %+v, row %q; want %s", c.ID, k, c.Description, row)
		}
		res := broken.RunCase(context.Background(), c)
		if res.Verdict != verdict.Fail || !slices.Contains(res.Broken(), w.invariant) {
			t.Errorf("%s on the broken service: %s %v, notes %q; want FAIL %s", c.ID, res.Verdict, res.Broken(), res.Notes, w.invariant)
		}
		if power := strings.Contains(strings.Join(res.Notes, "; "), "power loss at "+row+" (worker fault)"); power != (c.Kind != faults.Crash) {
			t.Errorf("%s: a power loss noted %v, want %v: %q", c.ID, power, c.Kind != faults.Crash, res.Notes)
		}
		t.Logf("broken: %s: %s %v", c.ID, res.Verdict, res.Broken())
	}

	correct := runnerOwn(t)
	own, calls := ownSweep(t, correct)
	if n := steps(calls); len(n) == 0 || len(own) != 0 {
		t.Fatalf("the correct service: %s durable steps %v and %d sweep cases, want one step each and none", w.method, n, len(own))
	}
	for _, n := range steps(calls) {
		if n != 1 {
			t.Fatalf("the correct service's %s took %d durable steps, want 1: %+v", w.method, n, calls)
		}
	}
	for _, c := range cases {
		res := correct.RunCase(context.Background(), c)
		fired := strings.Contains(strings.Join(res.Notes, "; "), "SIGKILLed right after fsync "+w.file+", durable step 1 of its store call")
		if res.Verdict != verdict.Pass || !fired {
			t.Errorf("%s on the correct service: %s %v, kill fired %v, notes %q; want a pass after the kill", c.ID, res.Verdict, res.Broken(), fired, res.Notes)
		}
	}
	// The correct call syncs once: a kill after its second sync never
	// fires.
	k := *cases[0].Steps[0].Durable
	k.Step = 2
	miss := correct.RunCase(context.Background(), catalogue.DurableStepCase(k))
	if miss.Verdict != verdict.NotExercised || miss.NotExercised == nil || miss.NotExercised.Cause != verdict.CauseUnreachable {
		t.Errorf("a kill after a step the call never takes: %s %+v, notes %q; want not exercised", miss.Verdict, miss.NotExercised, miss.Notes)
	}
}

// certify --service-cmd on the broken variant, --class durable-step: the
// probe, the sweep, the verdict (exit 1, I5; I8 for System B's variant)
// and a scenario of each failing kill that names the service and its own
// --bug; run replays the
// scenario through the same service, failing as it did, and on the
// correct service (the bug taken out) the same crash passes.
func TestCertifyOwnStoresDurableStepSweep(t *testing.T) {
	t.Run("ops.create", func(t *testing.T) {
		certifyOwnSweep(t, ownSweepCase{method: "ops.create", bug: refservice.BugTwoTransactionCreate, invariant: "I5"})
	})
	t.Run("plans.save", func(t *testing.T) {
		certifyOwnSweep(t, ownSweepCase{method: "plans.save", bug: refservice.BugTwoTransactionPlanSave, invariant: "I8"})
	})
}

func certifyOwnSweep(t *testing.T, w ownSweepCase) {
	needLazyMount(t)
	var out, errs bytes.Buffer
	dir := t.TempDir()
	command := os.Args[0] + " speak-own"
	code, err := certifyrun.Run(context.Background(), certifyrun.Options{
		Config: sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, Seed: 1, Bugs: []reference.Bug{reference.Bug(w.bug)},
			Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"},
			Service:  &sim.ServiceSpec{Command: command, Timeout: 30 * time.Second}},
		Backend: "sqlite", Label: "sqlite", WorkDir: dir, Quiet: true, Parallel: 2,
		Selection: catalogue.Selection{Classes: []string{catalogue.DurableStepClass}},
		Explore:   certifyrun.Explore{Part: true}, Stderr: io.MultiWriter(&errs, &out)}, &out)
	if err != nil || code != 1 {
		t.Fatalf("exit %d, %v; want 1\n%s", code, err, out.String())
	}
	path := filepath.Join(dir, "durable-step-"+strings.ReplaceAll(w.method, ".", "-")+"-1-of-2-power-loss.yaml")
	for _, want := range []string{
		w.method + " after fsync 1 of 2            FAIL " + w.invariant,
		"durable-step-" + w.method + "-1-of-2-power-loss broke " + w.invariant + ": replay with: crashmatrix run " + path + " --repeat 10",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	sc, err := scenarios.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Service == nil || sc.Service.Command != command || !slices.Equal(sc.Service.Bugs, []reference.Bug{reference.Bug(w.bug)}) || len(sc.Bugs) > 0 {
		t.Fatalf("the scenario's service is %+v, bugs %v; want %q with its bug %s", sc.Service, sc.Bugs, command, w.bug)
	}
	replay := func(s *scenarios.Scenario) (int, string) {
		var rout, rerr bytes.Buffer
		code, err := scenariorun.Run(context.Background(), scenariorun.Options{Scenarios: []*scenarios.Scenario{s}, Paths: map[*scenarios.Scenario]string{s: path},
			Config:  sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}},
			Backend: "sqlite", Want: "sqlite", Repeat: 1, WorkDir: t.TempDir(), Replay: func(string) string { return "" }, Stderr: &rerr}, &rout)
		if err != nil {
			t.Fatal(err)
		}
		return code, rout.String() + rerr.String()
	}
	if code, got := replay(sc); code != 0 {
		t.Errorf("the scenario replayed on the broken service: exit %d; want 0 (it fails again, %s, as it expects)\n%s", code, w.invariant, got)
	}
	sc.Service.Bugs = nil
	if code, got := replay(sc); code != 1 || !strings.Contains(got, `verdict "pass", want "FAIL"`) {
		t.Errorf("the scenario replayed on the correct service: exit %d; want 1, the crash passing\n%s", code, got)
	}
}

// needLazyMount fails the test where the power-loss column's lazy mount
// cannot run: the sweep needs it.
func needLazyMount(t *testing.T) {
	t.Helper()
	if err := lazyfs.Available(); err != nil {
		t.Fatal(sim.PowerLossNotTested(err.Error()))
	}
}

// ownSweep probes the service and returns the durable-step sweep over
// what the probe counted (every case kept by the service's declarations;
// TestCertifyOwnStoresDurableStepSweep builds it as certify does), and
// what the probe counted.
func ownSweep(t *testing.T, r *sim.Runner) ([]catalogue.Case, []catalogue.DurableCall) {
	t.Helper()
	pr, err := r.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !r.WatchesDurableSteps() {
		t.Fatalf("a service run with its files on the lazy mount watches no durable steps (power loss: %q)", r.PowerLossUntested())
	}
	cases, left := r.ServiceCases(catalogue.DurableStepCases(pr.Durable))
	if len(left) != 0 {
		t.Fatalf("the service left out sweep cases: %v", left)
	}
	return cases, pr.Durable
}
