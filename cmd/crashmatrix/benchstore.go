package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/storecmd"
	"github.com/spf13/cobra"
)

// benchStoreCmd measures what certifying a store over the store protocol
// costs: a store call through the protocol next to the same call on the
// Go SQLite adapter, a store process's start-up (paid once per process,
// never per call), and the embedded crash matrix (System A) on the store
// next to the Go SQLite matrix in the same run.
func benchStoreCmd() *cobra.Command {
	var command, benchDir string
	var calls, rounds, parallel int
	cmd := &cobra.Command{
		Use:   "bench-store --store-cmd CMD",
		Short: "Measure a store over the store protocol: cost per call, start-up, and its crash matrix next to the Go SQLite one",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if command == "" {
				return fmt.Errorf("--store-cmd is required")
			}
			if calls < 1 || rounds < 1 {
				return fmt.Errorf("--calls and --rounds must be at least 1")
			}
			if benchDir == "" {
				benchDir = os.TempDir()
				if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
					benchDir = "/dev/shm"
				}
			}
			work, err := os.MkdirTemp(benchDir, "crashmatrix-bench-store-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(work)
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "crashmatrix bench-store: %q, case data in %s\n", command, benchDir)
			if err := benchCalls(cmd.Context(), out, command, work, calls); err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			var walls [2][]time.Duration
			specs := []sim.BackendSpec{{Name: "sqlite"}, storecmd.Spec(command, "", wd, 0)}
			for round := range rounds {
				for i, spec := range specs {
					dir, err := os.MkdirTemp(work, "matrix-")
					if err != nil {
						return err
					}
					r, err := sim.NewRunner(sim.Config{Backend: spec, Launcher: sim.BinaryLauncher{Path: self}, WorkDir: dir,
						LeaseTTL: 600 * time.Millisecond, Seed: int64(round + 1), Adaptive: true})
					if err != nil {
						return err
					}
					var cases []sim.Case
					for _, c := range sim.Matrix(600) {
						if c.System != faults.PlanSave {
							cases = append(cases, c)
						}
					}
					rep := r.RunAll(cmd.Context(), cases, parallel, nil)
					r.CloseShared()
					if rep.ExitCode != 0 {
						return fmt.Errorf("the System A matrix on %s did not certify (exit %d): the figure would be meaningless; case data in %s", spec.Name, rep.ExitCode, dir)
					}
					walls[i] = append(walls[i], rep.Took)
					ratio := ""
					if i == 1 {
						ratio = fmt.Sprintf(" (%.2fx the Go SQLite round just before)", float64(rep.Took)/float64(walls[0][round]))
					}
					fmt.Fprintf(out, "  round %d, %-9s System A matrix: %d cases, %s%s\n", round+1, spec.Name, len(cases), rep.Took.Round(time.Millisecond), ratio)
					_ = os.RemoveAll(dir)
				}
			}
			med := func(d []time.Duration) time.Duration { s := slices.Clone(d); slices.Sort(s); return s[len(s)/2] }
			goWall, storeWall := med(walls[0]), med(walls[1])
			fmt.Fprintf(out, "embedded System A matrix, median of %d: Go SQLite %s, %s over the protocol %s: %.2fx (target <= 3x)\n",
				rounds, goWall.Round(time.Millisecond), "store-cmd", storeWall.Round(time.Millisecond), float64(storeWall)/float64(goWall))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&command, "store-cmd", "", "the System A store's command (store protocol), e.g. \"python3 -S examples/python/sqlite_store.py\"")
	fl.StringVar(&benchDir, "workdir", "", "where case data goes (default /dev/shm when present)")
	fl.IntVar(&calls, "calls", 2000, "store calls timed for the cost per call")
	fl.IntVar(&rounds, "rounds", 1, "matrix rounds on each backend")
	fl.IntVar(&parallel, "parallel", 12, "cases at once in the matrices")
	return cmd
}

// benchCalls times a store process's start-up and two calls through the
// protocol (a point read and a compare-and-set write), next to the same
// calls on the Go SQLite adapter.
func benchCalls(ctx context.Context, out interface{ Write([]byte) (int, error) }, command, work string, calls int) error {
	var starts []time.Duration
	var client *storeproc.Client
	for i := range 5 {
		t0 := time.Now()
		c, err := storeproc.Start(ctx, storeproc.Options{Command: command, Dir: filepath.Join(work, fmt.Sprintf("calls-%d", i))})
		if err != nil {
			return err
		}
		starts = append(starts, time.Since(t0))
		if i < 4 {
			_ = c.Close()
		} else {
			client = c
		}
	}
	defer client.Close()
	slices.Sort(starts)
	fmt.Fprintf(out, "store process start-up (exec + hello), median of 5: %s; paid once per store process: one per worker process of a case, one per snapshot, one per conformance bundle; never per call\n",
		starts[2].Round(100*time.Microsecond))
	goStores, err := sqlite.Open(filepath.Join(work, "go.db"), sqlite.Options{})
	if err != nil {
		return err
	}
	defer goStores.Close()
	for _, b := range []struct {
		name string
		st   reference.Stores
	}{{"Go SQLite adapter", goStores}, {"store protocol", client.Stores()}} {
		op, plan := storetest.FixtureOp("bench", "d1", "op-bench", 0, 1000)
		if _, err := b.st.Ops.CreateIfAbsent(ctx, op, plan); err != nil {
			return err
		}
		t0 := time.Now()
		for range calls {
			if _, err := b.st.Ops.Get(ctx, "op-bench"); err != nil {
				return err
			}
		}
		read := time.Since(t0) / time.Duration(calls)
		cur := op
		t0 = time.Now()
		for i := range calls {
			next := cur
			next.UpdatedAt = cur.UpdatedAt + 1
			next.FailureReason = fmt.Sprint(i)
			if ok, err := b.st.Ops.CompareAndSet(ctx, cur, next); err != nil || !ok {
				return fmt.Errorf("%s: compare-and-set %d: %v %v", b.name, i, ok, err)
			}
			cur = next
		}
		write := time.Since(t0) / time.Duration(calls)
		fmt.Fprintf(out, "%-18s per call over %d calls: ops.get %s, ops.cas (one write transaction) %s\n", b.name, calls, read.Round(time.Microsecond), write.Round(time.Microsecond))
	}
	return nil
}
