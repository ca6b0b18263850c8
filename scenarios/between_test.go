package scenarios

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// processRuns is how many runs with worker processes must each catch a
// between-calls mutant.
const processRuns = 3

// The library's between-calls mutants (a fault at point storeCall) are
// caught by their invariant in every one of processRuns runs with real
// worker processes, not only in the in-process mode's simulated time.
func TestBetweenCallsMutantsCaughtByProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real worker processes")
	}
	lib, err := Library()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range lib {
		if !strings.HasPrefix(s.Name, "mutant-") || !slices.ContainsFunc(s.Steps, func(st Step) bool {
			return slices.ContainsFunc(st.Faults, func(f Fault) bool { return f.Point == faults.StoreCall })
		}) {
			continue
		}
		n++
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			for run := 1; run <= processRuns; run++ {
				r, err := sim.NewRunner(s.Apply(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: int64(run),
					Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}}))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				res := r.RunCase(ctx, s.Case())
				if res.Verdict == verdict.NotExercised {
					res = r.RunCase(ctx, s.Case()) // as the runner retries it
				}
				cancel()
				r.CloseShared()
				if err := s.JudgeResult(res); err != nil {
					t.Fatalf("run %d of %d: %v (notes: %s)", run, processRuns, err, strings.Join(res.Notes, "; "))
				}
			}
		})
	}
	if n < 6 {
		t.Fatalf("%d library scenarios pin a between-calls mutant, want at least 6", n)
	}
}
