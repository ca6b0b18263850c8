package scenarios

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
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
	if err := sim.RunWorkerFile(context.Background(), path, embedded.SQLite()); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	return 0
}

// Every library scenario gives the outcome it expects in both execution
// modes — worker processes killed with SIGKILL, and the in-process mode
// (goroutine workers abandoned at the crash, simulated time) — and the two
// modes agree on the verdict and on the invariants broken.
func TestLibraryRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real worker processes")
	}
	lib, err := Library()
	if err != nil {
		t.Fatal(err)
	}
	// Four cases at once, like sim.Runner.RunAll.
	slots := make(chan struct{}, 4)
	for _, s := range lib {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			if err := s.CheckBackend("sqlite"); err != nil {
				// The suite runs every library scenario: one pinned to a
				// server backend would silently never run here.
				t.Fatalf("library scenarios must run on the embedded default: %v", err)
			}
			var verdicts []string
			for _, inProcess := range []bool{false, true} {
				mode := map[bool]string{false: "process kills", true: "in-process"}[inProcess]
				cfg := s.Apply(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1, InProcess: inProcess,
					Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}})
				r, err := sim.NewRunner(cfg)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				res := r.RunCase(ctx, s.Case())
				if res.Verdict == verdict.NotExercised {
					// The runner retries a case whose faults did not fire.
					res = r.RunCase(ctx, s.Case())
				}
				cancel()
				r.CloseShared()
				if err := s.JudgeResult(res); err != nil {
					var v []string
					for _, x := range res.Violations {
						v = append(v, x.String())
					}
					t.Fatalf("%s: %v\nnotes: %s\nviolations: %s", mode, err, strings.Join(res.Notes, "; "), strings.Join(v, "; "))
				}
				verdicts = append(verdicts, fmt.Sprintf("%s %v", res.Verdict, res.Broken()))
			}
			if verdicts[0] != verdicts[1] {
				t.Fatalf("the modes disagree: process kills gave %s, in-process gave %s", verdicts[0], verdicts[1])
			}
		})
	}
}

// A scenario replays deterministically: ten runs give the same verdict and
// the same history (times, pids and spaces aside), in both modes; pauses
// included.
func TestReplayIsDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real worker processes")
	}
	for _, name := range []string{"class-unknown-window", "class-lease-expiry-stale-writer", "class-competing-revision", "mutant-skip-revision-check", "incident-stuck-graph-applied"} {
		s, err := Load("library/" + name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, inProcess := range []bool{true, false} {
			r, err := sim.NewRunner(s.Apply(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1, InProcess: inProcess,
				Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}}))
			if err != nil {
				t.Fatal(err)
			}
			var first []string
			var firstVerdict string
			for i := 0; i < 10; i++ {
				res := r.RunCase(context.Background(), s.Case())
				tr, v := history.Trace(res.Timeline), fmt.Sprintf("%s %v", res.Verdict, res.Broken())
				if i == 0 {
					first, firstVerdict = tr, v
					continue
				}
				if v != firstVerdict {
					t.Fatalf("%s (in-process %v): run %d gave %s, run 1 gave %s", name, inProcess, i+1, v, firstVerdict)
				}
				if !slicesEqual(tr, first) {
					t.Fatalf("%s (in-process %v): run %d's history differs from run 1's:\n%s", name, inProcess, i+1, diff(first, tr))
				}
			}
			r.CloseShared()
		}
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func diff(a, b []string) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("record %d: %q vs %q", i+1, a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(a), len(b))
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

// A hung worker is killed at its deadline and reported; the case is
// undecided, never a pass.
func TestHungWorkerIsKilledAndReported(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real worker processes")
	}
	// The hang is a long pause on the wall clock (on the harness clock a
	// pause costs nothing).
	r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1, WallClock: true,
		ProcessTimeout: 2 * time.Second, Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}})
	if err != nil {
		t.Fatal(err)
	}
	c := catalogue.Case{ID: "hung", System: "ingestion", Class: "hung", Steps: []catalogue.Step{
		{Worker: "stuck", Actions: []catalogue.Action{{Do: "ingest", Doc: "d1", Content: catalogue.DocD1v1}}, Arms: faults.Arms{faults.BeforeGraphWrite: faults.PauseOn(600*time.Second, 1)}},
		{Worker: "quiesce", Actions: []catalogue.Action{{Do: "recover"}}, ContinueOnError: true},
	}}
	start := time.Now()
	res := r.RunCase(context.Background(), c)
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("the case took %s: the hung worker was waited on", took)
	}
	if res.Verdict != verdict.Undecided {
		t.Fatalf("verdict %s, want undecided; notes %v", res.Verdict, res.Notes)
	}
	if !strings.Contains(strings.Join(res.Notes, "; "), "hung and was killed") {
		t.Fatalf("notes %v do not report the hung worker", res.Notes)
	}
}
