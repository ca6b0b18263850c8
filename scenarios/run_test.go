package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/sim"
)

// TestMain lets the test binary act as a worker process of a case (the
// runner re-executes it with the worker's spec in the environment).
func TestMain(m *testing.M) {
	if path := os.Getenv(sim.WorkerSpecEnv); path != "" {
		os.Exit(runWorker(path))
	}
	os.Exit(m.Run())
}

func runWorker(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	var spec sim.WorkerSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	if err := sim.RunWorker(context.Background(), spec, sim.SQLiteBackend(), sim.ProcessWorkerOptions()); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	return 0
}

// Every library scenario, run for real on the embedded SQLite backend with
// killed worker processes, gives the outcome it expects.
func TestLibraryRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real worker processes")
	}
	lib, err := Library()
	if err != nil {
		t.Fatal(err)
	}
	// Four cases at once, like sim.Runner.RunAll: the windows' timing
	// (lease and claim TTLs against recovery rounds) assumes an unloaded
	// machine.
	slots := make(chan struct{}, 4)
	for _, s := range lib {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			if err := s.CheckBackend("sqlite"); err != nil {
				t.Skip(err)
			}
			cfg := s.Apply(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1,
				Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}})
			r, err := sim.NewRunner(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res := r.RunCase(ctx, s.Case())
			if res.Verdict == sim.NotExercised {
				// The runner retries a case whose faults did not fire.
				res = r.RunCase(ctx, s.Case())
			}
			if err := s.JudgeResult(res); err != nil {
				var v []string
				for _, x := range res.Violations {
					v = append(v, x.String())
				}
				t.Fatalf("%v\nnotes: %s\nviolations: %s", err, strings.Join(res.Notes, "; "), strings.Join(v, "; "))
			}
		})
	}
}

// Judge bites: the skip-revision-check scenario run without its bug holds
// I2, and its expectation must then report the difference.
func TestJudgeBitesOnARealRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real worker processes")
	}
	s, err := Load("library/mutant-skip-revision-check.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s.Bugs = nil
	r, err := sim.NewRunner(s.Apply(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1,
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}}))
	if err != nil {
		t.Fatal(err)
	}
	res := r.RunCase(context.Background(), s.Case())
	err = s.JudgeResult(res)
	if err == nil || !strings.Contains(err.Error(), "did not break I2") {
		t.Fatalf("verdict %s broke %v; Judge said %v, want it to report that I2 held", res.Verdict, res.Broken(), err)
	}
}
