package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/storecmd"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/spf13/cobra"
)

// benchStoreCmd measures what certifying a store over the store protocol
// costs: a store call through the protocol next to the same call on the
// Go SQLite adapter (wall time, and CPU time on each side of the pipe), a
// store process's start-up (paid once per process, never per call), and
// the embedded crash matrix (System A) on the store next to the Go SQLite
// matrix in the same run, with the number of store processes it started
// (how often a JVM store pays its start-up) and the verdict on the 3x
// target of issue 23.
func benchStoreCmd() *cobra.Command {
	var command, benchDir, docFile, name string
	var calls, rounds, parallel int
	var target float64
	var certifyTarget time.Duration
	cmd := &cobra.Command{
		Use:   "bench-store --store-cmd CMD",
		Short: "Measure a store over the store protocol: cost per call, start-up, and its crash matrix next to the Go SQLite one",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if command == "" {
				return fmt.Errorf("--store-cmd is required")
			}
			if benchDir == "" {
				benchDir = benchRoot()
			}
			work, err := os.MkdirTemp(benchDir, "crashmatrix-bench-store-")
			if err != nil {
				return err
			}
			keep := false // a matrix that did not certify keeps its case data
			defer func() {
				if !keep {
					_ = os.RemoveAll(work)
				}
			}()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "crashmatrix bench-store: %q, case data in %s\n", command, benchDir)
			cost, err := benchCalls(cmd.Context(), out, command, work, calls)
			if err != nil {
				return err
			}
			if rounds == 0 {
				return nil
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			var walls, cpus [2][]time.Duration
			var profiles []storeRound
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
					var cases []catalogue.Case
					for _, c := range catalogue.Lease(600 * time.Millisecond).Matrix() {
						if c.System != faults.PlanSave {
							cases = append(cases, c)
						}
					}
					started0, handed0, returned0 := storeproc.SpareTotals()
					cpu0 := cpuOf(syscall.RUSAGE_SELF) + cpuOf(syscall.RUSAGE_CHILDREN)
					rep := r.RunAll(cmd.Context(), cases, parallel, nil)
					r.CloseShared() // stops the pooled store processes: their CPU counts
					cpu := cpuOf(syscall.RUSAGE_SELF) + cpuOf(syscall.RUSAGE_CHILDREN) - cpu0
					if rep.ExitCode != 0 {
						keep = true
						var why []string
						for _, res := range rep.Results {
							if res.Verdict != verdict.Pass && len(why) < 3 {
								why = append(why, fmt.Sprintf("%s: %s %s", res.Case.ID, res.Verdict, strings.Join(append(res.Broken(), res.Notes...), "; ")))
							}
						}
						return fmt.Errorf("the System A matrix on %s did not certify (exit %d): the figure would be meaningless; case data in %s\n%s", spec.Name, rep.ExitCode, dir, strings.Join(why, "\n"))
					}
					walls[i] = append(walls[i], rep.Took)
					cpus[i] = append(cpus[i], cpu)
					extra := ""
					if i == 1 {
						opens := 0
						for _, res := range rep.Results {
							for _, w := range res.Workers {
								opens += len(w.StoreStarts)
							}
						}
						started, handed, returned := storeproc.SpareTotals()
						sr := storeRound{opens: opens, spares: started - started0, handed: handed - handed0, returned: returned - returned0, cpu: cpu, goCPU: cpus[0][round], wall: rep.Took, starts: rep.StoreStarts}
						profiles = append(profiles, sr)
						extra = fmt.Sprintf("; %d store processes started for the workers (%.1f a case; %d of them by the supervisor ahead of need), %d worker store opens took one ready (%d given back by a worker that ended without a crash; the snapshots' and initial-state loads' are pooled between cases; both when the store declares reopen), %.2fx the Go SQLite round just before; %s",
							sr.started(), float64(sr.started())/float64(len(cases)), sr.spares, sr.handed, sr.returned, float64(rep.Took)/float64(walls[0][round]), rep.StoreStarts)
					}
					// CPU of the processes waited for: a store process
					// killed with its worker is not (it is reaped by init).
					fmt.Fprintf(out, "  round %d, %-9s System A matrix: %d cases, %s (CPU %s)%s\n", round+1, spec.Name, len(cases),
						rep.Took.Round(time.Millisecond), cpu.Round(10*time.Millisecond), extra)
					_ = os.RemoveAll(dir)
				}
			}
			// What the durable-step sweep adds on each (not in the timed
			// matrices: bench times it on the embedded default).
			for _, spec := range specs {
				dir, err := os.MkdirTemp(work, "durable-")
				if err != nil {
					return err
				}
				r, err := sim.NewRunner(sim.Config{Backend: spec, Launcher: sim.BinaryLauncher{Path: self}, WorkDir: dir, LeaseTTL: 600 * time.Millisecond, Seed: 1})
				if err != nil {
					return err
				}
				if r.WatchesDurableSteps() {
					_, err = sweepCases(cmd, r, spec.Name)
				} else {
					fmt.Fprintf(out, "durable steps on %s: not swept here (%s)\n", spec.Name, sim.PowerLossNotTested(r.PowerLossUntested()))
				}
				r.CloseShared()
				_ = os.RemoveAll(dir)
				if err != nil {
					return err
				}
			}
			med := func(d []time.Duration) time.Duration { s := slices.Clone(d); slices.Sort(s); return s[len(s)/2] }
			// The load of a shared machine drifts between rounds: each
			// round's ratio is taken against the Go round run just before
			// it, and the verdict is on the median of those.
			var ratios []float64
			for k := range walls[1] {
				ratios = append(ratios, float64(walls[1][k])/float64(walls[0][k]))
			}
			slices.Sort(ratios)
			ratio := ratios[len(ratios)/2]
			verdict := "met"
			if ratio > target {
				verdict = "NOT met"
			}
			fmt.Fprintf(out, "embedded System A matrix, %d round(s): medians Go SQLite %s, store-cmd over the protocol %s; ratio to the Go round just before, median %.2fx; target <= %gx: %s\n",
				rounds, med(walls[0]).Round(time.Millisecond), med(walls[1]).Round(time.Millisecond), ratio, target, verdict)
			if ratio > target {
				fmt.Fprintln(out, storeProfile(profiles, cost))
			}
			if certifyTarget > 0 {
				return benchCertify(cmd.Context(), out, self, command, work, certifyTarget)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&command, "store-cmd", "", "the System A store's command (store protocol), e.g. \"python3 -S examples/python/sqlite_store.py\"")
	fl.StringVar(&benchDir, "workdir", "", "where case data goes (default /dev/shm when it has 1 GiB free)")
	fl.IntVar(&calls, "calls", 2000, "store calls timed for the cost per call")
	fl.IntVar(&rounds, "rounds", 1, "matrix rounds on each backend (0: the cost per call only)")
	fl.IntVar(&parallel, "parallel", 12, "cases at once in the matrices")
	fl.Float64Var(&target, "target", storeMatrixTarget, "the target for the matrix's ratio to the Go SQLite matrix (issue 40: 1.5 for the Python example, 4 for the Java one)")
	fl.DurationVar(&certifyTarget, "certify", 0, "also time `crashmatrix certify --store-cmd CMD` (the conformance suites, then the full matrix) against this target (0: not run)")
	fl.StringVar(&docFile, "doc", "", "also write the figures, with the date, commit, machine and load average, into the section \"bench store NAME\" of this Markdown file (make bench: docs/performance.md)")
	fl.StringVar(&name, "name", "", "the store's name in the --doc section (python, java)")
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if docFile != "" && name == "" {
			return fmt.Errorf("--doc needs --name (the section is \"bench store NAME\")")
		}
		return checkFlags(c, args)
	}
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if docFile == "" {
			return run(c, args)
		}
		return benchToDoc(c, docFile, "store "+name, func(c *cobra.Command) error { return run(c, args) })
	}
	return cmd
}

// benchCalls times a store process's start-up and two calls through the
// protocol (a point read and a compare-and-set write), next to the same
// calls on the Go SQLite adapter, in wall time and in CPU time on each
// side of the pipe.
func benchCalls(ctx context.Context, out io.Writer, command, work string, calls int) (storeStartCost, error) {
	var starts, firsts []time.Duration
	var client *storeproc.Client
	childCPU0 := cpuOf(syscall.RUSAGE_CHILDREN)
	var startCPU time.Duration
	// Enough starts that the median holds still on a shared machine (five
	// moved it by a fifth from run to run).
	const startSamples = 21
	// A namespace of its own for each, as the matrix gives each case: a
	// store on a server meets no key of an earlier run.
	space := sim.RunNamespace()
	for i := range startSamples {
		t0 := time.Now()
		c, err := storeproc.Start(ctx, storeproc.Options{Command: command, Dir: filepath.Join(work, fmt.Sprintf("calls-%d", i)), Namespace: fmt.Sprintf("%s-bench-%d", space, i)})
		if err != nil {
			return storeStartCost{}, err
		}
		starts = append(starts, time.Since(t0))
		// The first request after hello: a JVM runs it in its
		// interpreter, before the JIT has compiled anything of the store.
		t1 := time.Now()
		if _, err := c.Stores().Ops.Get(ctx, "op-first"); !errors.Is(err, reference.ErrNotFound) {
			return storeStartCost{}, fmt.Errorf("the first request, ops.get of an operation never created: %v, want not found", err)
		}
		firsts = append(firsts, time.Since(t1))
		if i < startSamples-1 {
			_ = c.Close() // waits for the process: its CPU time is counted
		} else {
			client = c
		}
	}
	startCPU = (cpuOf(syscall.RUSAGE_CHILDREN) - childCPU0) / (startSamples - 1)
	defer client.Close()
	slices.Sort(starts)
	slices.Sort(firsts)
	cost := storeStartCost{wall: starts[startSamples/2], cpu: startCPU, first: firsts[startSamples/2]}
	fmt.Fprintf(out, "store process start-up (exec + hello), median of %d: %s wall, %s CPU in the store process (its first request after hello, ops.get: %s wall); paid once per store process, never per call (a Java store pays its JVM start-up as often; the matrix rounds below count the processes)\n",
		startSamples, cost.wall.Round(100*time.Microsecond), startCPU.Round(100*time.Microsecond), cost.first.Round(100*time.Microsecond))
	if script := scriptLauncher(command); script != "" {
		fmt.Fprintf(out, "note: the store command's program %s is a script (#!), run before the store at every store process start (a pyenv or asdf shim costs tens of milliseconds); giving the interpreter's own path saves it (for Python: python3 -c 'import sys; print(sys.executable)')\n", script)
	}
	goStores, err := sqlite.Open(filepath.Join(work, "go.db"), sqlite.Options{})
	if err != nil {
		return cost, err
	}
	defer goStores.Close()
	for _, b := range []struct {
		name  string
		st    reference.Stores
		store *storeproc.Client
	}{{"Go SQLite adapter", goStores, nil}, {"store protocol", client.Stores(), client}} {
		op, plan := storetest.FixtureOp("bench", "d1", "op-bench", 0, 1000)
		if _, err := b.st.Ops.CreateIfAbsent(ctx, op, plan); err != nil {
			return cost, err
		}
		self0 := cpuOf(syscall.RUSAGE_SELF)
		t0 := time.Now()
		for range calls {
			if _, err := b.st.Ops.Get(ctx, "op-bench"); err != nil {
				return cost, err
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
				return cost, fmt.Errorf("%s: compare-and-set %d: %v %v", b.name, i, ok, err)
			}
			cur = next
		}
		write := time.Since(t0) / time.Duration(calls)
		selfPerCall := (cpuOf(syscall.RUSAGE_SELF) - self0) / time.Duration(2*calls)
		cpu := fmt.Sprintf("CPU per call %s", selfPerCall.Round(time.Microsecond))
		if b.store != nil {
			// The store process's CPU time over its life, less its
			// start-up, once it has exited.
			child0 := cpuOf(syscall.RUSAGE_CHILDREN)
			_ = b.store.Close()
			storePerCall := (cpuOf(syscall.RUSAGE_CHILDREN) - child0 - startCPU) / time.Duration(2*calls+1)
			cpu = fmt.Sprintf("CPU per call: %s harness side, %s in the store process", selfPerCall.Round(time.Microsecond), max(storePerCall, 0).Round(time.Microsecond))
		}
		fmt.Fprintf(out, "%-18s per call over %d calls: ops.get %s, ops.cas (one write transaction) %s; %s\n", b.name, calls, read.Round(time.Microsecond), write.Round(time.Microsecond), cpu)
	}
	return cost, nil
}

// cpuOf is the user + system CPU time of the process (RUSAGE_SELF) or of
// its children that have been waited for (RUSAGE_CHILDREN).
func cpuOf(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// storeMatrixTarget is the performance target of issue 23: the embedded
// System A matrix over the store protocol within this factor of the Go
// SQLite matrix of the same run.
const storeMatrixTarget = 3.0

// scriptLauncher returns the path of the store command's program when it
// is a script (it starts with "#!"), "" otherwise: a shim that finds the
// real interpreter at every start.
func scriptLauncher(command string) string {
	f := strings.Fields(command)
	if len(f) == 0 {
		return ""
	}
	path, err := exec.LookPath(f[0])
	if err != nil {
		return ""
	}
	fd, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer fd.Close()
	var head [2]byte
	if n, _ := io.ReadFull(fd, head[:]); n == 2 && string(head[:]) == "#!" {
		return path
	}
	return ""
}
