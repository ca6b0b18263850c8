package main

import (
	"context"
	"os"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	_ "github.com/crashmatrix/crashmatrix/sim/embedded" // the harness's stores: sqlite
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The test binary is three programs: the tests, a crashmatrix worker (when
// the supervisor re-executes it) and the service (argument "speak").
func TestMain(m *testing.M) {
	if path := os.Getenv(sim.WorkerSpecEnv); path != "" {
		os.Exit(sim.WorkerMain("worker", []string{"--spec", path}))
	}
	if len(os.Args) > 1 && os.Args[1] == "speak" {
		if err := Serve(os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runner runs cases on the reference through the service protocol: the
// service is this binary's Serve, the harness's stores sqlite.
func runner(t *testing.T, bugs ...string) *sim.Runner {
	t.Helper()
	cfg := sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1,
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"},
		Service:  &sim.ServiceSpec{Command: os.Args[0] + " speak"}}
	for _, b := range bugs {
		cfg.Bugs = append(cfg.Bugs, reference.Bug(b))
	}
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
	cases := catalogue.Selection{Kinds: []faults.Kind{faults.Crash}}.Cases(catalogue.Probe{}, r.Config().LeaseTTL.Milliseconds(), 1)
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
