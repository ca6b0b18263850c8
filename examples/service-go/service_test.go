package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc/refservice"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	_ "github.com/crashmatrix/crashmatrix/sim/embedded" // the harness's stores: sqlite
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The test binary is three programs: the tests, a crashmatrix worker (when
// the supervisor re-executes it) and the service (argument "speak";
// "speak-own" with its own stores, "speak-only-ingestion" or
// "speak-only-plansave" with one system).
func TestMain(m *testing.M) {
	if path := os.Getenv(sim.WorkerSpecEnv); path != "" {
		os.Exit(sim.WorkerMain("worker", []string{"--spec", path}))
	}
	if len(os.Args) > 3 && os.Args[1] == "speak-own-slow" {
		os.Exit(speakSlow(os.Args[2], os.Args[3]))
	}
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "speak") {
		o := refservice.Options{OwnStores: os.Args[1] == "speak-own"}
		if sys, one := strings.CutPrefix(os.Args[1], "speak-only-"); one {
			o.Systems = []string{sys}
		}
		if err := o.Serve(os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runnerMutant is runner with a backend mutant (of the harness's stores).
func runnerMutant(t *testing.T, mutant string) *sim.Runner {
	t.Helper()
	r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1, Mutant: mutant,
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"},
		Service:  &sim.ServiceSpec{Command: os.Args[0] + " speak"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runnerOwn runs the reference with its own stores (refservice.Options
// OwnStores): what the harness sees of them is the calls it reports and
// their read side.
func runnerOwn(t *testing.T, bugs ...reference.Bug) *sim.Runner {
	t.Helper()
	r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1, Bugs: bugs,
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"},
		Service:  &sim.ServiceSpec{Command: os.Args[0] + " speak-own"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runner runs cases on the reference through the service protocol: the
// service is this binary's Serve, the harness's stores sqlite.
func runner(t *testing.T, bugs ...reference.Bug) *sim.Runner {
	t.Helper()
	cfg := sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1,
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"},
		Service:  &sim.ServiceSpec{Command: os.Args[0] + " speak"}}
	cfg.Bugs = bugs
	r, err := sim.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReferenceThroughProtocolCrashes: the reference through the protocol
// passes the crash column at every window of System A, and every case's
// fault fired (a window the protocol never reached would be "not
// exercised", never a pass).
func TestReferenceThroughProtocolCrashes(t *testing.T) {
	r := runner(t)
	if d := r.Config().Service.Declared; d.Name != "crashmatrix-reference" {
		t.Fatalf("declared %+v", d)
	}
	cases := catalogue.Selection{Kinds: []faults.Kind{faults.Crash}}.Cases(catalogue.Probe{}, catalogue.Lease(r.Config().LeaseTTL), 1)
	rep := r.RunAll(context.Background(), cases, 2, nil)
	if len(rep.Results) != len(cases) || len(cases) < 10 {
		t.Fatalf("%d results of %d cases", len(rep.Results), len(cases))
	}
	for _, res := range rep.Results {
		if res.Verdict != verdict.Pass {
			t.Errorf("%s: %s %v %v %v", res.Case.ID, res.Verdict, res.Violations, res.Notes, res.NotExercised)
		}
		if len(res.Hits) == 0 {
			t.Errorf("%s: passed without a fault firing", res.Case.ID)
		}
	}
	t.Logf("%d cases passed through the service protocol", len(rep.Results))
	if rep.ExitCode != 0 {
		t.Fatalf("exit %d", rep.ExitCode)
	}
}

// TestMutantsThroughProtocol: every mutant of the catalogue is caught
// through the protocol by the slice of the matrix that catches it in
// process, with the invariant that names its defect.
func TestMutantsThroughProtocol(t *testing.T) {
	if testing.Short() {
		t.Skip("every mutant's slice through the protocol: minutes")
	}
	for _, m := range crashrun.Mutants() {
		t.Run(m.Name, func(t *testing.T) {
			if m.Explore != nil {
				t.Skip("caught by exploration only")
			}
			r := runner(t, m.Options.Bugs...)
			if m.Options.Mutant != "" {
				r = runnerMutant(t, m.Options.Mutant)
			}
			var probe verdict.Probe
			if slices.Contains(m.Options.Classes, catalogue.BetweenCallsClass) {
				var err error
				if probe, err = r.Probe(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			cases := catalogue.Selection{Points: m.Options.Points, Kinds: m.Options.Kinds, Classes: m.Options.Classes}.Cases(probe.Probe, catalogue.Lease(r.Config().LeaseTTL), 1)
			if len(cases) == 0 {
				t.Fatalf("no case matches the mutant's slice %+v", m.Options)
			}
			rep := r.RunAll(context.Background(), cases, 2, nil)
			if rep.ExitCode != 1 || !slices.Contains(rep.Broken(), m.Invariant) {
				var why []string
				for _, res := range rep.Results {
					why = append(why, fmt.Sprintf("%s=%s%v", res.Case.ID, res.Verdict, res.NotExercised))
				}
				t.Fatalf("exit %d, broke %v; want exit 1 and %s: %v", rep.ExitCode, rep.Broken(), m.Invariant, why)
			}
		})
	}
}

// TestReferenceThroughProtocolCertifies: the whole matrix (every window
// with every kind, the case classes, the store-call sweep) certifies the
// reference through the protocol, as it does in process.
func TestReferenceThroughProtocolCertifies(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole matrix through the protocol: minutes")
	}
	r := runner(t)
	probe, err := r.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cases := catalogue.Selection{}.Cases(probe.Probe, catalogue.Lease(r.Config().LeaseTTL), 1)
	rep := r.RunAll(context.Background(), cases, 2, nil)
	for _, res := range rep.Results {
		if res.Verdict != verdict.Pass && res.Verdict != verdict.NotApplicable {
			t.Errorf("%s: %s %v %v %v", res.Case.ID, res.Verdict, res.Violations, res.Notes, res.NotExercised)
		}
	}
	t.Logf("%d cases: exit %d", len(rep.Results), rep.ExitCode)
	if rep.ExitCode != 0 {
		t.Fatalf("exit %d", rep.ExitCode)
	}
}

// TestOwnStoresThroughProtocol: the reference keeping its stores itself
// (SQLite files in its dir, the calls to them reported, their read side
// served) passes the crash and unknown columns; the harness saw what
// reached those stores (its freeze and commit observations come from the
// reported calls, replayed through its store wrappers); and mutants are
// caught on what the read side returns and the calls report.
func TestOwnStoresThroughProtocol(t *testing.T) {
	r := runnerOwn(t)
	d := r.Config().Service.Declared
	if len(d.HarnessStores) != 0 || !d.Has("calls") {
		t.Fatalf("declared %+v", d)
	}
	cases := catalogue.Selection{Kinds: []faults.Kind{faults.Crash, faults.Unknown}}.Cases(catalogue.Probe{}, catalogue.Lease(r.Config().LeaseTTL), 1)
	cases, left := r.ServiceCases(cases)
	// Its locks are its own: the lease window is the harness's locks'.
	if want := []string{"1 case left out: window leaseAcquire is not declared"}; !slices.Equal(left, want) {
		t.Fatalf("left out %v, want %v", left, want)
	}
	rep := r.RunAll(context.Background(), cases, 2, nil)
	seen := map[string]int{}
	for _, res := range rep.Results {
		if res.Verdict != verdict.Pass {
			t.Errorf("%s: %s %v %v %v", res.Case.ID, res.Verdict, res.Violations, res.Notes, res.NotExercised)
		}
		for _, rec := range res.Timeline {
			if rec.Obs != nil {
				seen[string(rec.Obs.What)]++
			}
		}
	}
	for _, what := range []string{"freeze", "commit", "graph", "model", "intent"} {
		if seen[what] == 0 {
			t.Errorf("no %s observation in %d cases (seen %v): the reported calls did not reach the harness's eyes", what, len(rep.Results), seen)
		}
	}
	t.Logf("%d cases, exit %d, observations %v", len(rep.Results), rep.ExitCode, seen)
	for _, m := range []struct {
		bug   reference.Bug
		inv   string
		point faults.Point
		kind  faults.Kind
	}{
		{reference.BugRecallModelOnResume, "I1", faults.BeforeGraphWrite, faults.Crash},
		{reference.BugAdvanceBeforeGraphWrite, "I4", faults.BeforeGraphWrite, faults.Crash},
		{reference.BugStateBeforeRegistry, "I6", faults.BeforeRegistrySave, faults.Crash},
		{reference.BugPlanSaveKeyPerAttempt, "I8", faults.PlanSaveBeforeCheckpoint, faults.Crash},
	} {
		t.Run(string(m.bug), func(t *testing.T) {
			r := runnerOwn(t, m.bug)
			cases := catalogue.Selection{Points: []faults.Point{m.point}, Kinds: []faults.Kind{m.kind}}.Cases(catalogue.Probe{}, catalogue.Lease(r.Config().LeaseTTL), 1)
			rep := r.RunAll(context.Background(), cases, 2, nil)
			if rep.ExitCode != 1 || !slices.Contains(rep.Broken(), m.inv) {
				t.Fatalf("exit %d, broke %v; want exit 1 and %s", rep.ExitCode, rep.Broken(), m.inv)
			}
		})
	}
}

// TestOneSystemServiceNotProbedOnTheOther: a service that implements one
// system only (the reference declaring systems [ingestion] or [plansave]
// and refusing the other's intents, every store the harness's, as the
// Java example (System A) and the LangGraph one (System B) do) is not
// probed on the other: the fault-free probe runs to its end without the
// other system's probes (which failed it before: I8 "checkpoint gone" for
// System A, I5 for System B), a case of the other system run on it is not
// applicable with the reason rather than a FAIL for intents it never
// served, and the verdict lists the other's invariants as not judged.
func TestOneSystemServiceNotProbedOnTheOther(t *testing.T) {
	for _, c := range []struct {
		sys, other faults.System
		at         faults.Point
		notJudged  string
	}{
		{faults.Ingestion, faults.PlanSave, faults.PlanSaveBeforeCheckpoint, "I8: the service has no System B"},
		{faults.PlanSave, faults.Ingestion, faults.BeforeGraphWrite, "I1-I7: the service has no System A"},
	} {
		t.Run(string(c.sys), func(t *testing.T) {
			r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1,
				Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"},
				Service:  &sim.ServiceSpec{Command: os.Args[0] + " speak-only-" + string(c.sys)}})
			if err != nil {
				t.Fatal(err)
			}
			if d := r.Config().Service.Declared; !slices.Equal(d.Systems, []string{string(c.sys)}) || !d.HarnessStore("checkpoints") {
				t.Fatalf("declared %+v", d)
			}
			pr, err := r.Probe(context.Background())
			ran := 0
			for _, res := range pr.Results {
				t.Logf("probe %s: %s %v %v", res.Case.ID, res.Verdict, res.Violations, res.Notes)
				if res.Case.System == c.other {
					t.Errorf("probe %s ran %s on a service without it", res.Case.ID, c.other)
				} else {
					ran++
				}
			}
			if err != nil || ran == 0 {
				t.Errorf("probe: %v (%d of its cases ran)", err, ran)
			}
			if c.sys == faults.Ingestion && len(pr.StaleCalls) == 0 {
				t.Errorf("the probe stopped before its stale-call probes: %+v", pr.StaleCalls)
			}
			cases := catalogue.Selection{Points: []faults.Point{c.at}, Kinds: []faults.Kind{faults.Crash}}.Cases(pr.Probe, catalogue.Lease(r.Config().LeaseTTL), 1)
			if len(cases) != 1 {
				t.Fatalf("%d cases at %s", len(cases), c.at)
			}
			res := r.RunCase(context.Background(), cases[0])
			if res.Verdict != verdict.NotApplicable || !strings.Contains(strings.Join(res.Notes, ";"), "does not implement "+string(c.other)) {
				t.Errorf("a case of %s on a service without it: %s %v %v, want not applicable", c.other, res.Verdict, res.Violations, res.Notes)
			}
			if nj := strings.Join(r.Config().Service.NotJudged(), "\n"); !strings.Contains(nj, c.notJudged) {
				t.Errorf("not judged: %s", nj)
			}
		})
	}
}
