package properties

import (
	"context"
	"slices"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// betweenRuns is how many in-process runs of the between-calls sweep must
// each catch a between-calls mutant.
const betweenRuns = 5

// The between-calls mutants are out of reach of every named window: the
// matrix without the store-call stalls (catalogue windows, case classes,
// lease boundaries) certifies each of them, and the between-calls sweep
// catches each, by its invariant, in every one of betweenRuns runs. (The
// library pins each at its store call and runs it with worker processes
// too: scenarios' TestBetweenCallsMutantsCaughtByProcesses.)
func TestBetweenCallsMutantsNeedTheStoreCallStalls(t *testing.T) {
	n := 0
	for _, m := range crashrun.Mutants() {
		if !slices.Contains(m.Options.Classes, catalogue.BetweenCallsClass) {
			continue
		}
		n++
		t.Run(m.Name, func(t *testing.T) {
			r, probe := probedInProcess(t, sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, Bugs: m.Options.Bugs})
			ctx := context.Background()
			lease := catalogue.Lease(r.Config().LeaseTTL)
			named := catalogue.Selection{}.Cases(catalogue.Probe{Windows: probe.Windows}, lease, 1)
			if slices.ContainsFunc(named, catalogue.IsBetweenCalls) {
				t.Fatal("the named-window matrix holds between-calls cases")
			}
			if rep := r.RunAll(ctx, named, 2, nil); rep.ExitCode != 0 {
				t.Fatalf("the named-window matrix alone (%d cases) caught %s (exit %d, broke %v): it is not a between-calls mutant", len(named), m.Name, rep.ExitCode, rep.Broken())
			}
			between := catalogue.Selection{Classes: []string{catalogue.BetweenCallsClass}}.Cases(probe.Probe, lease, 1)
			if len(between) == 0 {
				t.Fatalf("no between-calls case (the probe counted %v store calls)", probe.StaleCalls)
			}
			for run := 1; run <= betweenRuns; run++ {
				rep := r.RunAll(ctx, between, 2, nil)
				if rep.ExitCode != 1 || !slices.Contains(rep.Broken(), m.Invariant) {
					t.Fatalf("run %d of %d: the between-calls sweep (%d cases) gave exit %d, broke %v; want exit 1 and %s", run, betweenRuns, len(between), rep.ExitCode, rep.Broken(), m.Invariant)
				}
				if run == 1 {
					var caught []string
					for _, res := range rep.Results {
						if slices.Contains(res.Broken(), m.Invariant) {
							caught = append(caught, res.Case.ID)
						}
					}
					t.Logf("%s caught by %d of %d between-calls cases: %v", m.Invariant, len(caught), len(between), caught)
				}
			}
		})
	}
	if n < 6 {
		t.Fatalf("%d between-calls mutants in the catalogue, want at least 6", n)
	}
}

// probedInProcess is an in-process runner of cfg (seed 1, in a folder of
// the test's) and what its probe found; the runner closes with the test.
func probedInProcess(t *testing.T, cfg sim.Config) (*sim.Runner, verdict.Probe) {
	t.Helper()
	cfg.WorkDir, cfg.InProcess, cfg.Seed = t.TempDir(), true, 1
	r, err := sim.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.CloseShared)
	probe, err := r.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r, probe
}
