package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/docstest"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/explore"
	"github.com/crashmatrix/crashmatrix/sim/servers/provision"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/spf13/cobra"
)

func benchCmd() *cobra.Command {
	var runBench func(cmd *cobra.Command) error
	var rounds, cycles, parallel, cycleParallel, randomKills, restarts int
	var leaseTTL, cycleTTL, exploreFor time.Duration
	var backend, benchDir, docFile string
	var matrixOnly bool
	var server serverFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the full crash matrix's wall time and kill-restart-recover cycles per second",
		RunE: func(cmd *cobra.Command, args []string) error {
			if docFile == "" {
				return runBench(cmd)
			}
			if matrixOnly {
				return fmt.Errorf("--doc with --matrix-only: the section --doc writes holds every figure, --matrix-only measures only the matrix and its floor")
			}
			return benchToDoc(cmd, docFile, backend, runBench)
		},
	}
	runBench = func(cmd *cobra.Command) (err error) {
		out := cmd.OutOrStdout()
		defer tuneGC(true)() // every figure with the GC certify runs with
		defer tuneProcs(parallel)()
		if benchDir == "" {
			benchDir = benchRoot()
		}
		name := backend
		server.noPowerLoss = true // the container figures are measured on the containers' own disks
		backend, self, cleanup, err := server.setUp(cmd, backend)
		if err != nil {
			return err
		}
		defer cleanup()
		fmt.Fprintf(out, "crashmatrix bench: backend %s, %d cores, %s/%s, case data in %s\n", name, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, benchDir)
		fmt.Fprintln(out, hostProbeLine("start"))
		defer func() {
			if err == nil {
				fmt.Fprintln(out, hostProbeLine("end"))
			}
		}()
		be, err := sim.ResolveBackend(sim.BackendSpec{Name: backend})
		if err != nil {
			return err
		}
		embedded := be.Embedded
		adaptive := leaseTTL <= 0
		leaseTTL = defaultLeaseTTL(leaseTTL, backend)
		if name == "containers" {
			fmt.Fprintf(out, "containers: PostgreSQL answered its first query %s after Run, Neo4j %s after Run\n",
				provision.LastTimings.Postgres.Round(time.Millisecond), provision.LastTimings.Neo4j.Round(time.Millisecond))
		}
		emptyGo, removeEmpty, err := buildEmptyGo()
		if err != nil {
			return err
		}
		defer removeEmpty()
		workerLauncher := sim.BinaryLauncher{Path: self, Backend: backend}
		// "crashmatrix-worker --floor", or "crashmatrix worker --floor"
		// where no worker binary lies next to crashmatrix.
		workerStart := workerLauncher.FloorCommand()
		workerStartName := strings.Join(append([]string{filepath.Base(workerStart.Path)}, workerStart.Args[1:]...), " ")
		var walls []time.Duration
		// Each round's against the floor measured right after it, and
		// the worker's own start next to the floor's.
		var ratios, cpuRatios, startRatios []float64
		var floorPerStart, workerPerStart []time.Duration
		var ddlRatios []float64 // a DDL round's CPU over the template round's
		var splits []floorSplit // where each round's CPU went, against its floor
		for i := 0; i < rounds; i++ {
			round := func() (verdict.Report, time.Duration, time.Duration, error) {
				return benchMatrixRound(cmd, &server, benchDir, backend, self, leaseTTL, int64(i+1), adaptive, parallel)
			}
			rep, cpu, supCPU, err := round()
			if err != nil {
				return fmt.Errorf("full matrix round %d: %w", i+1, err)
			}
			walls = append(walls, rep.Took)
			workers := 0
			for _, res := range rep.Results {
				workers += len(res.Workers)
			}
			fmt.Fprintf(out, "  full matrix round %d: %d cases (every window x every fault kind + case classes), %d worker processes, %s (CPU %s: supervisor %s, workers %s); %s\n",
				i+1, len(rep.Results), workers, rep.Took.Round(time.Millisecond), cpu.Round(time.Millisecond), supCPU.Round(time.Millisecond), (cpu - supCPU).Round(time.Millisecond), rep.Timing)
			floor, floorCPU, err := benchSpawn(func() *exec.Cmd { return exec.Command(emptyGo) }, workers, parallel)
			if err != nil {
				return err
			}
			start, startCPU, err := benchSpawn(workerLauncher.FloorCommand, workers, parallel)
			if err != nil {
				return err
			}
			ratios = append(ratios, rep.Took.Seconds()/floor.Seconds())
			cpuRatios = append(cpuRatios, cpu.Seconds()/floorCPU.Seconds())
			splits = append(splits, floorSplit{ratio: cpuRatios[i], workers: workers, cpu: cpu, supervisor: supCPU, floor: floorCPU, start: startCPU})
			startRatios = append(startRatios, startCPU.Seconds()/floorCPU.Seconds())
			floorPerStart = append(floorPerStart, floorCPU/time.Duration(workers))
			workerPerStart = append(workerPerStart, startCPU/time.Duration(workers))
			if name == "sqlite" {
				ddl, ddlCPU, err := benchSchemaDDL(round)
				if err != nil {
					return fmt.Errorf("full matrix round %d, databases by DDL: %w", i+1, err)
				}
				ddlRatios = append(ddlRatios, ddlCPU.Seconds()/cpu.Seconds())
				fmt.Fprintf(out, "  the same round with each case's database created by the schema's DDL (%s=ddl) instead of copied from the migrated template: %s (CPU %s): the template round took %.2fx its CPU\n",
					sqlite.SchemaEnv, ddl.Round(time.Millisecond), ddlCPU.Round(time.Millisecond), cpu.Seconds()/ddlCPU.Seconds())
			}
			fmt.Fprintf(out, "  spawn floor after round %d: %d empty Go processes started and exited, %d at a time, in %s (CPU %s): the round took %.2fx its wall time, %.2fx its CPU time; as many bare worker starts (%s) in %s (CPU %s): %.2fx the floor's CPU\n",
				i+1, workers, parallel, floor.Round(time.Millisecond), floorCPU.Round(time.Millisecond), ratios[i], cpuRatios[i],
				workerStartName, start.Round(time.Millisecond), startCPU.Round(time.Millisecond), startRatios[i])
		}
		slices.Sort(ratios)
		slices.Sort(cpuRatios)
		slices.Sort(startRatios)
		slices.Sort(floorPerStart)
		slices.Sort(workerPerStart)
		floorTarget := "target <= 6x: " + metOrNot(cpuRatios[len(cpuRatios)/2] <= 6)
		if !embedded {
			floorTarget = "the <= 6x target is the embedded default's: here the servers do most of the work"
		}
		fmt.Fprintf(out, "spawn floor (an empty Go binary, started as the supervisor starts a worker, measured after each round): the matrix takes median %.2fx the floor's CPU time (min %.2fx, max %.2fx over %d rounds; %s), median %.2fx its wall time\n",
			cpuRatios[len(cpuRatios)/2], cpuRatios[0], cpuRatios[len(cpuRatios)-1], len(cpuRatios), floorTarget, ratios[len(ratios)/2])
		if embedded && cpuRatios[len(cpuRatios)/2] > 6 {
			fmt.Fprintln(out, "what stands in the way of the matrix against the floor: "+medianSplit(splits).String())
		}
		fmt.Fprintf(out, "worker start (%s: the worker's binary started and exited, next to the floor): median %s of CPU per start against %s for the empty Go binary, median %.2fx (min %.2fx, max %.2fx over %d rounds; target <= 2x: %s)\n",
			workerStartName, workerPerStart[len(workerPerStart)/2].Round(time.Microsecond), floorPerStart[len(floorPerStart)/2].Round(time.Microsecond),
			startRatios[len(startRatios)/2], startRatios[0], startRatios[len(startRatios)-1], len(startRatios), metOrNot(startRatios[len(startRatios)/2] <= 2))
		if startRatios[len(startRatios)/2] > 2 {
			if p := workerInitProfile(workerLauncher.FloorCommand, 9); p != "" {
				fmt.Fprintln(out, "what stands in the way of the worker start: "+p)
			}
		}
		if len(ddlRatios) > 0 {
			slices.Sort(ddlRatios)
			fmt.Fprintf(out, "case databases copied from the migrated template (adapters/sqlite/template.db) instead of created by the schema's DDL in each case: a DDL round took median %.2fx the CPU of the template round next to it (min %.2fx, max %.2fx over %d rounds)\n",
				ddlRatios[len(ddlRatios)/2], ddlRatios[0], ddlRatios[len(ddlRatios)-1], len(ddlRatios))
		}
		sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
		median := walls[len(walls)/2]
		wallTarget := "no target for servers crashmatrix did not start"
		switch {
		case embedded:
			wallTarget = "target <= 5s on the embedded default: " + metOrNot(median <= 5*time.Second)
		case name == "containers":
			wallTarget = "target <= 20s on a quiet machine: " + metOrNot(median <= 20*time.Second)
		}
		fmt.Fprintf(out, "full matrix wall time: median %s, min %s, max %s over %d rounds (%s)\n",
			median.Round(time.Millisecond), walls[0].Round(time.Millisecond), walls[len(walls)-1].Round(time.Millisecond), len(walls), wallTarget)
		if matrixOnly {
			return nil
		}

		if name == "containers" {
			fmt.Fprintln(out, "power loss: not measured here (these containers keep their data on their own disks, so that the figures are the harness's and the servers'; certify --backend containers runs the power-loss column on lazy mounts)")
			fmt.Fprintln(out, "durable steps on containers: 0 sweep cases (the workers' store calls reach the servers over the network; certify sweeps no server's own syncs yet: a case killing PostgreSQL right after its WAL sync inside a store call is catalogue.ServerDurableCase)")
		} else if err := benchPowerLoss(cmd, &server, self, backend, benchDir, leaseTTL, parallel, rounds, adaptive); err != nil {
			return err
		} else if err := benchDurableSteps(cmd, &server, self, backend, benchDir, leaseTTL, parallel, rounds, adaptive); err != nil {
			return err
		}
		if server.faults != nil {
			if err := benchServerFaults(cmd, &server, self, backend, benchDir, leaseTTL, parallel, restarts); err != nil {
				return err
			}
		}
		if randomKills > 0 {
			if err := benchStoreWindows(cmd, &server, self, backend, benchDir, rounds, parallel, randomKills, leaseTTL, walls[len(walls)/2]); err != nil {
				return err
			}
			if err := benchKillReplay(cmd, self, backend, benchDir, leaseTTL, parallel, randomKills); err != nil {
				return err
			}
		}
		if cycles > 0 {
			if err := benchCycles(cmd, self, backend, benchDir, cycles, cycleParallel, cycleTTL); err != nil {
				return err
			}
		}
		if exploreFor > 0 {
			return benchExplore(cmd, self, exploreFor)
		}
		return nil
	}
	fl := cmd.Flags()
	fl.StringVar(&docFile, "doc", "", "also write the figures, with the date, commit, machine and load average, into the section \"bench BACKEND\" of this Markdown file (make bench: docs/performance.md)")
	fl.StringVar(&backend, "backend", "sqlite", "backend (containers: starts PostgreSQL and Neo4j first; the figures exclude start-up)")
	server.register(fl)
	fl.StringVar(&benchDir, "workdir", "", "where case data goes (default /dev/shm when it has 1 GiB free, TMPDIR or not: data survives a process kill there exactly as on disk, and the figures measure the harness rather than the disk; --workdir /tmp measures both)")
	fl.IntVar(&rounds, "rounds", 3, "full-matrix rounds")
	fl.BoolVar(&matrixOnly, "matrix-only", false, "measure only the full matrix and its spawn floor (the figures of the harness's own cost), nothing after them")
	fl.IntVar(&parallel, "parallel", 12, "cases at once in the full matrix")
	fl.DurationVar(&leaseTTL, "lease-ttl", 0, "lease TTL for the full matrix (default as for certify)")
	fl.IntVar(&randomKills, "random-kills", 100, "random kills added to the full matrix with the store's own windows, and hunting a mutant for the random-kill replay figure (0 skips both)")
	fl.IntVar(&cycles, "cycles", 300, "kill-restart-recover cycles")
	fl.IntVar(&restarts, "restarts", 3, "with --backend containers and server faults: server restarts measured per server (kill -> first answered query); then the server-fault matrix runs once")
	fl.IntVar(&cycleParallel, "cycle-parallel", 16, "cycles at once")
	fl.DurationVar(&cycleTTL, "cycle-lease-ttl", 50*time.Millisecond, "lease TTL for the cycles (a killed worker blocks its document this long)")
	fl.DurationVar(&exploreFor, "explore", 10*time.Second, "how long each exploration rate is measured (0 skips the exploration figures)")
	cmd.PreRunE = checkFlags
	return cmd
}

// benchToDoc runs the bench with its output also kept, then writes it into
// the section "bench BACKEND" of the Markdown file doc, under a line that
// says when, on which commit and machine, and under what load it was
// measured: the figures in the docs are what a run printed, never typed.
// A run that fails writes nothing.
func benchToDoc(cmd *cobra.Command, doc, backend string, run func(*cobra.Command) error) error {
	old, err := os.ReadFile(doc)
	if err != nil {
		return fmt.Errorf("--doc %s: %w", doc, err)
	}
	start, loadBefore := time.Now().UTC(), docstest.LoadAverage()
	var buf bytes.Buffer
	cmd.SetOut(io.MultiWriter(cmd.OutOrStdout(), &buf))
	if err := run(cmd); err != nil {
		return err
	}
	var args []string
	for i := 1; i < len(os.Args); i++ {
		if a := os.Args[i]; a == "--doc" || a == "-doc" {
			i++
		} else if !strings.HasPrefix(a, "--doc=") {
			args = append(args, a)
		}
	}
	section := fmt.Sprintf("Written by `crashmatrix %s` on %s, %s, %s %s/%s, on %s; load average %s at the start, %s at the end.\n\n```text\n%s```\n",
		strings.Join(args, " "), start.Format("2006-01-02 15:04 UTC"), benchCommit(doc), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		docstest.Machine(runtime.NumCPU()), loadBefore, docstest.LoadAverage(), buf.String())
	return os.WriteFile(doc, []byte(docstest.ReplaceSection(string(old), "bench "+backend, section)), 0o644)
}

// benchCommit names the code a bench measured: the binary's own revision
// when the build recorded one, else the git checkout it runs in
// (docstest.GitCommit); either with "(with uncommitted changes)" when the
// tree differed from it.
func benchCommit(doc string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) >= 7 {
			if dirty {
				return "commit " + rev[:7] + " (with uncommitted changes)"
			}
			return "commit " + rev[:7]
		}
	}
	return docstest.GitCommit(doc)
}

// benchServerFaults measures each server's restart (SIGKILL to the first
// answered query, the server back on its data) and the wall time of the
// server-fault matrix (every window x server-crash, ack-lost, conn-reset x
// server).
func benchServerFaults(cmd *cobra.Command, server *serverFlags, self, backend, benchDir string, leaseTTL time.Duration, parallel, restarts int) error {
	out, ctx := cmd.OutOrStdout(), cmd.Context()
	for _, name := range server.faults.Names() {
		var took []time.Duration
		for i := 0; i < restarts; i++ {
			d, err := server.faults.Crash(ctx, name)
			if err != nil {
				return err
			}
			took = append(took, d)
		}
		if len(took) > 0 {
			slices.Sort(took)
			fmt.Fprintf(out, "%s restart (SIGKILL -> first answered query, same data): median %s, min %s, max %s over %d restarts\n",
				name, took[len(took)/2].Round(time.Millisecond), took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), len(took))
		}
	}
	work, err := os.MkdirTemp(benchDir, "crashmatrix-bench-")
	if err != nil {
		return err
	}
	cfg := sim.Config{Backend: sim.BackendSpec{Name: backend}, Launcher: sim.BinaryLauncher{Path: self}, WorkDir: work, LeaseTTL: leaseTTL, Seed: 1}
	server.useFaults(&cfg)
	r, err := sim.NewRunner(cfg)
	if err != nil {
		os.RemoveAll(work)
		return err
	}
	cases := catalogue.Lease(leaseTTL).ServerMatrix()
	restartsBefore := len(server.faults.Restarts())
	rep := r.RunAll(ctx, cases, parallel, nil)
	matrixRestarts := server.faults.Restarts()[restartsBefore:]
	if rep.ExitCode != 0 {
		report.WriteTerminal(out, rep, report.Options{Command: "bench"})
		fmt.Fprintf(out, "case data and histories: %s\n", work)
		return fmt.Errorf("server-fault matrix did not certify: the figure would be meaningless")
	}
	os.RemoveAll(work)
	crashes := 0
	for _, c := range cases {
		if c.Kind == faults.ServerCrash {
			crashes++
		}
	}
	fmt.Fprintf(out, "server-fault matrix: %d cases, %d at once (%d server-crash cases: those crashing one server run together and share %d restarts), wall time %s (target <= 3m: %s)\n",
		len(cases), parallel, crashes, len(matrixRestarts), rep.Took.Round(time.Millisecond), metOrNot(rep.Took <= 3*time.Minute))
	return nil
}

// benchCycles prints the kill-restart-recover cycle rate.
func benchCycles(cmd *cobra.Command, self, backend, benchDir string, cycles, parallel int, ttl time.Duration) error {
	out := cmd.OutOrStdout()
	work, err := os.MkdirTemp(benchDir, "crashmatrix-bench-")
	if err != nil {
		return err
	}
	r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: backend}, Launcher: sim.BinaryLauncher{Path: self}, WorkDir: work, LeaseTTL: ttl, Seed: 7})
	if err != nil {
		os.RemoveAll(work)
		return err
	}
	rep := r.RunAll(cmd.Context(), catalogue.CycleCases(cycles), parallel, nil)
	if good := rep.Counts[verdict.Pass]; good != cycles {
		report.WriteTerminal(out, rep, report.Options{Command: "bench"})
		return fmt.Errorf("%d of %d kill-restart-recover cycles did not pass (data in %s)", cycles-good, cycles, work)
	}
	os.RemoveAll(work)
	fmt.Fprintf(out, "kill-restart-recover cycles: %d in %s = %.1f cycles/s (%d at once, lease TTL %s; each cycle: a worker killed by SIGKILL after its graph write, a new worker recovers, invariants checked) (target >= 50/s: %s)\n",
		cycles, rep.Took.Round(time.Millisecond), float64(cycles)/rep.Took.Seconds(), parallel, ttl, metOrNot(float64(cycles)/rep.Took.Seconds() >= 50))
	return nil
}

// benchExplore prints the exploration figures: schedules per second in
// both modes, and for each reference mutant the time to the first violation
// and to the shrunk scenario.
func benchExplore(cmd *cobra.Command, self string, d time.Duration) error {
	out := cmd.OutOrStdout()
	ctx := cmd.Context()
	restore := tuneGC(true)
	defer restore()
	newRunner := func(inProcess, files, simStore bool, bugs []reference.Bug, mutant string) (*sim.Runner, string, error) {
		base := ""
		if inProcess {
			base = benchRoot()
		}
		work, err := os.MkdirTemp(base, "crashmatrix-bench-explore-")
		if err != nil {
			return nil, "", err
		}
		cfg := sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, Launcher: sim.BinaryLauncher{Path: self}, WorkDir: work,
			InProcess: inProcess, InProcessFiles: files, Seed: 1, Bugs: bugs, Mutant: mutant}
		if simStore {
			b := embedded.SimStore()
			cfg.Use, cfg.SimulatedStore = &b, true
		}
		r, err := sim.NewRunner(cfg)
		if err != nil {
			os.RemoveAll(work)
		}
		return r, work, err
	}
	// The in-process rate is measured in rounds, each exploring further
	// along one seed, and reported as the median: a shared machine's speed
	// wanders by a third between seconds.
	for _, mode := range []struct {
		name                       string
		inProcess, files, simStore bool
		rounds                     int
		target                     float64 // schedules/s (issue #24), 0 for none
	}{
		{"in-process, SQLite memory database (the in-process default)", true, false, false, 5, 1500},
		{"in-process, SIMULATED durable store (explore --sim-store: protocol only, never certifies)", true, false, true, 5, 10000},
		{"in-process, SQLite file on " + map[bool]string{true: "tmpfs", false: "disk"}[benchRoot() == "/dev/shm"] + " (--in-process-files)", true, true, false, 3, 0},
		{"process kills, SQLite file", false, true, false, 1, 0},
	} {
		r, work, err := newRunner(mode.inProcess, mode.files, mode.simStore, nil, "")
		if err != nil {
			return err
		}
		var rates []float64
		var schedules int
		var took, cpu time.Duration
		for i := 0; i < mode.rounds; i++ {
			cpu0 := cpuTime()
			res := explore.Run(ctx, r, explore.Options{Seed: 11, Skip: schedules, Budget: d / time.Duration(mode.rounds), Parallel: 4 * runtime.NumCPU()})
			cpu += cpuTime() - cpu0
			if res.Finding != nil {
				r.CloseShared()
				os.RemoveAll(work)
				return fmt.Errorf("exploring the reference found %s (seed 11, schedule %d): the rate would be meaningless", res.Finding.Invariant, res.Finding.Index)
			}
			rates = append(rates, res.Rate())
			schedules += res.Schedules
			took += res.Took
		}
		r.CloseShared()
		os.RemoveAll(work)
		slices.Sort(rates)
		line := fmt.Sprintf("exploration, %s: %d schedules in %s", mode.name, schedules, took.Round(time.Millisecond))
		if len(rates) > 1 {
			line += fmt.Sprintf(", median %.0f schedules/s (min %.0f, max %.0f over %d rounds)", rates[len(rates)/2], rates[0], rates[len(rates)-1], len(rates))
		} else {
			line += fmt.Sprintf(" = %.0f schedules/s", rates[0])
		}
		if mode.inProcess && schedules > 0 {
			ms := float64(cpu.Microseconds()) / 1000 / float64(schedules)
			// What the CPU cost allows with every core busy: on a shared
			// machine the wall rate measures the neighbours too.
			line += fmt.Sprintf(", %.3f ms of CPU each (%.0f/s if all %d cores were ours)", ms, float64(runtime.NumCPU())*1000/ms, runtime.NumCPU())
		}
		line += " (reference, seed 11, no violation)"
		if mode.target > 0 {
			line += fmt.Sprintf(" (target >= %.0f schedules/s: %s)", mode.target, metOrNot(rates[len(rates)/2] >= mode.target))
		}
		fmt.Fprintln(out, line)
	}
	for _, m := range []struct {
		name   string
		bugs   []reference.Bug
		mutant string
		want   string
	}{
		{string(reference.BugRecallModelOnResume), []reference.Bug{reference.BugRecallModelOnResume}, "", "I1"},
		{string(reference.BugSkipRevisionCheck), []reference.Bug{reference.BugSkipRevisionCheck}, "", "I2"},
		{string(reference.BugAdvanceBeforeGraphWrite), []reference.Bug{reference.BugAdvanceBeforeGraphWrite}, "", "I4"},
		{sim.MutantCreateNotMerge, nil, sim.MutantCreateNotMerge, "I3"},
		{sim.MutantNoUniqueConstraint, nil, sim.MutantNoUniqueConstraint, "I8"},
	} {
		r, work, err := newRunner(true, false, false, m.bugs, m.mutant)
		if err != nil {
			return err
		}
		res := explore.Run(ctx, r, explore.Options{Seed: 1, Budget: time.Minute, Parallel: 2, Target: m.want})
		r.CloseShared()
		os.RemoveAll(work)
		f := res.Finding
		if f == nil {
			return fmt.Errorf("mutant %s: no %s violation within a minute", m.name, m.want)
		}
		fmt.Fprintf(out, "mutant %-28s %s after %3d schedules: first violation %6s, shrunk file %6s (%d actions and faults outside the final recovery; %s; reproduced %d/%d)\n",
			m.name, f.Invariant, res.Schedules, f.FoundAfter.Round(time.Millisecond), f.ShrunkAfter.Round(time.Millisecond), explore.Size(f.Shrunk), explore.Describe(f.Shrunk), f.Reproduced, f.Reruns)
	}
	return nil
}

// benchStoreWindows prints the wall time of the full matrix with the
// store's own windows (the probe run that finds them included) and kills
// random-instant kills, next to the plain matrix's median.
func benchStoreWindows(cmd *cobra.Command, server *serverFlags, self, backend, benchDir string, rounds, parallel, kills int, ttl, plain time.Duration) error {
	out := cmd.OutOrStdout()
	var walls []time.Duration
	for i := 0; i < rounds; i++ {
		r, work, err := benchRunner(server, benchDir, backend, self, ttl, int64(i+1), false)
		if err != nil {
			return err
		}
		start := time.Now()
		probe, err := r.Probe(cmd.Context())
		if err != nil {
			r.CloseShared()
			os.RemoveAll(work)
			return fmt.Errorf("store windows round %d: %w", i+1, err)
		}
		cases := catalogue.Selection{RandomKills: kills}.Cases(probe.Probe, catalogue.Lease(ttl), int64(i+1))
		rep := r.RunAll(cmd.Context(), cases, parallel, nil)
		rep.WithProbe(probe, nil, catalogue.Selection{})
		took := time.Since(start)
		if rep.ExitCode != 0 {
			report.WriteTerminal(out, rep, report.Options{Command: "bench"})
			fmt.Fprintf(out, "case data and histories: %s\n", work)
			return fmt.Errorf("matrix with store windows and random kills, round %d, did not certify: the figure would be meaningless", i+1)
		}
		os.RemoveAll(work)
		walls = append(walls, took)
		fmt.Fprintf(out, "  with store windows and random kills, round %d: probe (%d store windows, fault-free run %s) + %d cases, %s\n",
			i+1, len(probe.Windows), probe.Base.Round(time.Millisecond), len(cases), took.Round(time.Millisecond))
	}
	sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
	med := walls[len(walls)/2]
	fmt.Fprintf(out, "full matrix + store windows + %d random kills: median %s, min %s, max %s over %d rounds = %.2fx the plain matrix's median %s (target <= 2x: %s)\n",
		kills, med.Round(time.Millisecond), walls[0].Round(time.Millisecond), walls[len(walls)-1].Round(time.Millisecond), len(walls), float64(med)/float64(plain), plain.Round(time.Millisecond), metOrNot(float64(med) <= 2*float64(plain)))
	return nil
}

// benchSpawn starts n processes of command, parallel at once, each as
// the supervisor starts a worker, and returns their wall and CPU time.
// bench measures the spawn floor (an empty Go binary: what the harness
// cannot do without) and the worker's bare start (its binary told to exit
// at once) right after each matrix round with that round's number of
// processes, so that each ratio compares measurements a shared machine's
// load moved alike.
func benchSpawn(command func() *exec.Cmd, n, parallel int) (time.Duration, time.Duration, error) {
	sem := make(chan struct{}, max(parallel, 1))
	errs := make(chan error, n)
	var wg sync.WaitGroup
	cpu0 := cpuTimeWithChildren()
	start := time.Now()
	for range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c := command()
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			if out, err := c.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("spawn floor: %s: %v: %s", strings.Join(c.Args, " "), err, out)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	cpu := cpuTimeWithChildren() - cpu0
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	return max(took, time.Microsecond), max(cpu, time.Microsecond), nil
}

// emptyGoMain is the spawn floor's program: a Go binary that starts its
// runtime and exits.
const emptyGoMain = "package main\n\nfunc main() {}\n"

// buildEmptyGo builds the spawn floor's empty Go binary with the go
// command on PATH (the toolchain that built the workers, for make bench)
// in a temporary folder; remove deletes the folder.
func buildEmptyGo() (bin string, remove func(), err error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", nil, fmt.Errorf("bench: the spawn floor is an empty Go binary bench builds, and there is no go command on PATH: %w", err)
	}
	dir, err := os.MkdirTemp("", "crashmatrix-emptygo-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(emptyGoMain), 0o644); err != nil {
		remove()
		return "", nil, err
	}
	bin = filepath.Join(dir, "empty-go")
	build := exec.Command(goCmd, "build", "-o", bin, "main.go")
	build.Dir = dir
	// Outside any module or workspace: the file alone.
	build.Env = append(os.Environ(), "GO111MODULE=off", "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("bench: building the spawn floor's empty Go binary: %v\n%s", err, out)
	}
	return bin, remove, nil
}

// benchRunner is one full-matrix round's runner, on a fresh work directory.
// benchMatrixRound runs the full matrix once on a fresh runner: its
// report, the CPU of the whole process tree and the supervisor's own. A
// round that does not certify is an error, its report printed first.
func benchMatrixRound(cmd *cobra.Command, server *serverFlags, benchDir, backend, self string, leaseTTL time.Duration, seed int64, adaptive bool, parallel int) (verdict.Report, time.Duration, time.Duration, error) {
	r, work, err := benchRunner(server, benchDir, backend, self, leaseTTL, seed, adaptive)
	if err != nil {
		return verdict.Report{}, 0, 0, err
	}
	cases := catalogue.Lease(leaseTTL).Matrix()
	cpu0, self0 := cpuTimeWithChildren(), cpuTime()
	rep := r.RunAll(cmd.Context(), cases, parallel, nil)
	cpu := cpuTimeWithChildren() - cpu0
	supCPU := cpuTime() - self0
	if rep.ExitCode != 0 {
		report.WriteTerminal(cmd.OutOrStdout(), rep, report.Options{Command: "bench"})
		fmt.Fprintf(cmd.OutOrStdout(), "case data and histories: %s\n", work)
		return rep, cpu, supCPU, fmt.Errorf("the matrix did not certify: the figure would be meaningless")
	}
	os.RemoveAll(work)
	return rep, cpu, supCPU, nil
}

// benchSchemaDDL runs round again with every new case database created
// by the schema's DDL (sqlite.SchemaEnv=ddl, which the workers inherit)
// rather than copied from the migrated template: its wall and CPU time.
func benchSchemaDDL(round func() (verdict.Report, time.Duration, time.Duration, error)) (time.Duration, time.Duration, error) {
	old, had := os.LookupEnv(sqlite.SchemaEnv)
	os.Setenv(sqlite.SchemaEnv, "ddl")
	defer func() {
		if had {
			os.Setenv(sqlite.SchemaEnv, old)
		} else {
			os.Unsetenv(sqlite.SchemaEnv)
		}
	}()
	rep, cpu, _, err := round()
	return rep.Took, cpu, err
}

func benchRunner(server *serverFlags, benchDir, backend, self string, ttl time.Duration, seed int64, adaptive bool) (*sim.Runner, string, error) {
	return benchRunnerWith(server, benchDir, backend, self, ttl, seed, adaptive, nil)
}

// benchRunnerWith is benchRunner with the configuration adjusted by set
// (when not nil) before the runner is made.
func benchRunnerWith(server *serverFlags, benchDir, backend, self string, ttl time.Duration, seed int64, adaptive bool, set func(*sim.Config)) (*sim.Runner, string, error) {
	work, err := os.MkdirTemp(benchDir, "crashmatrix-bench-")
	if err != nil {
		return nil, "", err
	}
	cfg := sim.Config{Backend: sim.BackendSpec{Name: backend}, Launcher: sim.BinaryLauncher{Path: self}, WorkDir: work, LeaseTTL: ttl, Seed: seed, Adaptive: adaptive}
	if set != nil {
		set(&cfg)
	}
	// The servers reached as certify reaches them: a case that arms no
	// server fault goes to them directly, one that does through its proxy.
	server.useFaults(&cfg)
	r, err := sim.NewRunner(cfg)
	if err != nil {
		// An error path leaves no empty folder behind (in /dev/shm by
		// default, where it outlives the run until reboot).
		os.RemoveAll(work)
	}
	return r, work, err
}

func metOrNot(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}
