// Package bench measures what crash-certifying costs and prints each
// figure with its target: the full crash matrix's wall and CPU time next
// to the spawn floor, what the power-loss, torn-write and durable-step
// columns, server faults and random kills add, how often a random kill's
// finding replays, kill-restart-recover cycles per second and the
// exploration rates (Run: crashmatrix bench); and a store over the store
// protocol next to the Go SQLite adapter (Store: crashmatrix bench-store).
// ToDoc writes what a run printed into docs/performance.md.
package bench

import (
	"bytes"
	"context"
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
	"github.com/crashmatrix/crashmatrix/internal/tune"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/servers/provision"
	"github.com/crashmatrix/crashmatrix/sim/servers/serverfaults"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Options are a run of crashmatrix bench, its backend set up.
type Options struct {
	// Name is the backend as asked for ("containers": servers
	// crashmatrix started), Backend the one the workers run, Self the
	// executable they run from.
	Name, Backend, Self string
	// Dir is where case data goes ("": /dev/shm when it has room, else
	// the temporary folder).
	Dir string
	// Rounds of the full matrix (and of each ratio after it), Parallel
	// cases at once.
	Rounds, Parallel int
	// LeaseTTL is the full matrix's lease TTL; Adaptive lets the runner
	// adapt it (no --lease-ttl given).
	LeaseTTL time.Duration
	Adaptive bool
	// MatrixOnly measures the full matrix and its spawn floor only.
	MatrixOnly bool
	// RandomKills added to the matrix with the store's own windows, and
	// hunting a mutant for the random-kill replay figure (0: neither).
	RandomKills int
	// Restarts measured per server, with server faults.
	Restarts int
	// Cycles kill-restart-recover cycles (0: none), CycleParallel at
	// once, on CycleTTL.
	Cycles, CycleParallel int
	CycleTTL              time.Duration
	// Explore is how long each exploration rate is measured (0: none).
	Explore time.Duration
	// Servers carries out server faults (nil: none); UseServerFaults
	// lets a runner's configuration reach the servers through it.
	Servers         *serverfaults.Supervisor
	UseServerFaults func(*sim.Config)
	Out             io.Writer
}

// sitting is one run of Run.
type sitting struct {
	Options
	ctx      context.Context
	embedded bool
}

// Run measures the figures of crashmatrix bench on o.Backend and prints
// them on o.Out, each with its target, between the host probe's lines.
// A figure whose run did not certify ends it with an error (the figure
// would be meaningless).
func Run(ctx context.Context, o Options) (err error) {
	defer tune.GC(true)() // every figure with the GC certify runs with
	defer tune.Procs(o.Parallel)()
	if o.Dir == "" {
		o.Dir = root()
	}
	if o.UseServerFaults == nil {
		o.UseServerFaults = func(*sim.Config) {}
	}
	out := o.Out
	fmt.Fprintf(out, "crashmatrix bench: backend %s, %d cores, %s/%s, case data in %s\n", o.Name, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, o.Dir)
	fmt.Fprintln(out, hostProbeLine("start"))
	defer func() {
		if err == nil {
			fmt.Fprintln(out, hostProbeLine("end"))
		}
	}()
	be, err := sim.ResolveBackend(sim.BackendSpec{Name: o.Backend})
	if err != nil {
		return err
	}
	s := &sitting{Options: o, ctx: ctx, embedded: be.Embedded}
	if o.Name == "containers" {
		fmt.Fprintf(out, "containers: PostgreSQL answered its first query %s after Run, Neo4j %s after Run\n",
			provision.LastTimings.Postgres.Round(time.Millisecond), provision.LastTimings.Neo4j.Round(time.Millisecond))
	}
	plain, err := s.matrix()
	if err != nil || o.MatrixOnly {
		return err
	}
	return s.after(plain)
}

// after measures the figures after the full matrix's (plain: its median
// wall time).
func (o *sitting) after(plain time.Duration) error {
	if o.Name == "containers" {
		fmt.Fprintln(o.Out, "power loss: not measured here (these containers keep their data on their own disks, so that the figures are the harness's and the servers'; certify --backend containers runs the power-loss column on lazy mounts)")
		fmt.Fprintln(o.Out, "durable steps on containers: not measured here (these containers keep their data on their own disks; certify --backend containers, with its lazy mounts, sweeps PostgreSQL's own durable steps: a case after each step of each shape of store call, catalogue.ServerDurableCases)")
	} else if err := o.powerLoss(); err != nil {
		return err
	} else if err := o.durableSteps(); err != nil {
		return err
	}
	if o.Servers != nil {
		if err := o.serverFaults(); err != nil {
			return err
		}
	}
	if o.RandomKills > 0 {
		if err := o.storeWindows(plain); err != nil {
			return err
		}
		if err := o.killReplay(); err != nil {
			return err
		}
	}
	if o.Cycles > 0 {
		if err := o.cycles(); err != nil {
			return err
		}
	}
	if o.Explore > 0 {
		return o.exploration()
	}
	return nil
}

// matrixRound is what one full-matrix round measured, against the spawn
// floor measured right after it, and the worker's own start next to the
// floor's.
type matrixRound struct {
	wall                          time.Duration
	ratio, cpuRatio, startRatio   float64
	floorPerStart, workerPerStart time.Duration
	// split is where the round's CPU went against its floor.
	split floorSplit
	// ddlRatio is, on SQLite, the CPU of the same round with each case's
	// database created by the schema's DDL over this round's (0: not
	// measured).
	ddlRatio float64
}

// matrix measures the full matrix in rounds, each next to the spawn
// floor, prints the figures and returns the median wall time.
func (o *sitting) matrix() (time.Duration, error) {
	emptyGo, removeEmpty, err := buildEmptyGo()
	if err != nil {
		return 0, err
	}
	defer removeEmpty()
	workerLauncher := sim.BinaryLauncher{Path: o.Self, Backend: o.Backend}
	// "crashmatrix-worker --floor", or "crashmatrix worker --floor"
	// where no worker binary lies next to crashmatrix.
	workerStart := workerLauncher.FloorCommand()
	workerStartName := strings.Join(append([]string{filepath.Base(workerStart.Path)}, workerStart.Args[1:]...), " ")
	var rounds []matrixRound
	for i := 0; i < o.Rounds; i++ {
		m, err := o.matrixRound(i, emptyGo, workerLauncher, workerStartName)
		if err != nil {
			return 0, err
		}
		rounds = append(rounds, m)
	}
	o.floorFigures(rounds, workerLauncher, workerStartName)
	return o.wallFigure(rounds), nil
}

// matrixRound runs round i of the full matrix, then the spawn floor (as
// many empty Go processes, emptyGo, as the round started workers) and as
// many bare worker starts, and prints both.
func (o *sitting) matrixRound(i int, emptyGo string, workerLauncher sim.BinaryLauncher, workerStartName string) (matrixRound, error) {
	out := o.Out
	rep, cpu, supCPU, err := o.matrixRun(int64(i + 1))
	if err != nil {
		return matrixRound{}, fmt.Errorf("full matrix round %d: %w", i+1, err)
	}
	workers := 0
	for _, res := range rep.Results {
		workers += len(res.Workers)
	}
	fmt.Fprintf(out, "  full matrix round %d: %d cases (every window x every fault kind + case classes), %d worker processes, %s (CPU %s: supervisor %s, workers %s); %s\n",
		i+1, len(rep.Results), workers, rep.Took.Round(time.Millisecond), cpu.Round(time.Millisecond), supCPU.Round(time.Millisecond), (cpu - supCPU).Round(time.Millisecond), rep.Timing)
	floor, floorCPU, err := benchSpawn(func() *exec.Cmd { return exec.Command(emptyGo) }, workers, o.Parallel)
	if err != nil {
		return matrixRound{}, err
	}
	start, startCPU, err := benchSpawn(workerLauncher.FloorCommand, workers, o.Parallel)
	if err != nil {
		return matrixRound{}, err
	}
	m := matrixRound{wall: rep.Took, ratio: rep.Took.Seconds() / floor.Seconds(), cpuRatio: cpu.Seconds() / floorCPU.Seconds(),
		startRatio: startCPU.Seconds() / floorCPU.Seconds(), floorPerStart: floorCPU / time.Duration(workers), workerPerStart: startCPU / time.Duration(workers)}
	m.split = floorSplit{ratio: m.cpuRatio, workers: workers, cpu: cpu, supervisor: supCPU, floor: floorCPU, start: startCPU}
	if o.Backend == "sqlite" {
		ddl, ddlCPU, err := o.schemaDDL(int64(i + 1))
		if err != nil {
			return matrixRound{}, fmt.Errorf("full matrix round %d, databases by DDL: %w", i+1, err)
		}
		m.ddlRatio = ddlCPU.Seconds() / cpu.Seconds()
		fmt.Fprintf(out, "  the same round with each case's database created by the schema's DDL (%s=ddl) instead of copied from the migrated template: %s (CPU %s): the template round took %.2fx its CPU\n",
			sqlite.SchemaEnv, ddl.Round(time.Millisecond), ddlCPU.Round(time.Millisecond), cpu.Seconds()/ddlCPU.Seconds())
	}
	fmt.Fprintf(out, "  spawn floor after round %d: %d empty Go processes started and exited, %d at a time, in %s (CPU %s): the round took %.2fx its wall time, %.2fx its CPU time; as many bare worker starts (%s) in %s (CPU %s): %.2fx the floor's CPU\n",
		i+1, workers, o.Parallel, floor.Round(time.Millisecond), floorCPU.Round(time.Millisecond), m.ratio, m.cpuRatio,
		workerStartName, start.Round(time.Millisecond), startCPU.Round(time.Millisecond), m.startRatio)
	return m, nil
}

// matrixRun runs the full matrix once on a fresh runner: its report,
// the CPU of the whole process tree and the supervisor's own. A round
// that does not certify is an error, its report printed first.
func (o *sitting) matrixRun(seed int64) (verdict.Report, time.Duration, time.Duration, error) {
	r, work, err := o.runner(seed, o.Adaptive)
	if err != nil {
		return verdict.Report{}, 0, 0, err
	}
	cases := catalogue.Lease(o.LeaseTTL).Matrix()
	cpu0, self0 := tune.CPUTimeWithChildren(), tune.CPUTime()
	rep := r.RunAll(o.ctx, cases, o.Parallel, nil)
	cpu := tune.CPUTimeWithChildren() - cpu0
	supCPU := tune.CPUTime() - self0
	if rep.ExitCode != 0 {
		report.WriteTerminal(o.Out, rep, report.Options{Command: "bench"})
		fmt.Fprintf(o.Out, "case data and histories: %s\n", work)
		return rep, cpu, supCPU, fmt.Errorf("the matrix did not certify: the figure would be meaningless")
	}
	os.RemoveAll(work)
	return rep, cpu, supCPU, nil
}

// schemaDDL runs the round of seed again with every new case database
// created by the schema's DDL (sqlite.SchemaEnv=ddl, which the workers
// inherit) rather than copied from the migrated template: its wall and
// CPU time.
func (o *sitting) schemaDDL(seed int64) (time.Duration, time.Duration, error) {
	old, had := os.LookupEnv(sqlite.SchemaEnv)
	os.Setenv(sqlite.SchemaEnv, "ddl")
	defer func() {
		if had {
			os.Setenv(sqlite.SchemaEnv, old)
		} else {
			os.Unsetenv(sqlite.SchemaEnv)
		}
	}()
	rep, cpu, _, err := o.matrixRun(seed)
	return rep.Took, cpu, err
}

// sorted is what of each round get picks, sorted.
func sorted[T float64 | time.Duration](rounds []matrixRound, get func(matrixRound) T) []T {
	var v []T
	for _, r := range rounds {
		v = append(v, get(r))
	}
	slices.Sort(v)
	return v
}

// floorFigures prints the matrix's CPU time against the spawn floor's
// and the worker's start against the floor's, over the rounds.
func (o *sitting) floorFigures(rounds []matrixRound, workerLauncher sim.BinaryLauncher, workerStartName string) {
	ratios := sorted(rounds, func(m matrixRound) float64 { return m.ratio })
	cpuRatios := sorted(rounds, func(m matrixRound) float64 { return m.cpuRatio })
	startRatios := sorted(rounds, func(m matrixRound) float64 { return m.startRatio })
	floorPerStart := sorted(rounds, func(m matrixRound) time.Duration { return m.floorPerStart })
	workerPerStart := sorted(rounds, func(m matrixRound) time.Duration { return m.workerPerStart })
	floorTarget := "target <= 6x: " + metOrNot(cpuRatios[len(cpuRatios)/2] <= 6)
	if !o.embedded {
		floorTarget = "the <= 6x target is the embedded default's: here the servers do most of the work"
	}
	fmt.Fprintf(o.Out, "spawn floor (an empty Go binary, started as the supervisor starts a worker, measured after each round): the matrix takes median %.2fx the floor's CPU time (min %.2fx, max %.2fx over %d rounds; %s), median %.2fx its wall time\n",
		cpuRatios[len(cpuRatios)/2], cpuRatios[0], cpuRatios[len(cpuRatios)-1], len(cpuRatios), floorTarget, ratios[len(ratios)/2])
	if o.embedded && cpuRatios[len(cpuRatios)/2] > 6 {
		var splits []floorSplit
		for _, r := range rounds {
			splits = append(splits, r.split)
		}
		fmt.Fprintln(o.Out, "what stands in the way of the matrix against the floor: "+medianSplit(splits).String())
	}
	fmt.Fprintf(o.Out, "worker start (%s: the worker's binary started and exited, next to the floor): median %s of CPU per start against %s for the empty Go binary, median %.2fx (min %.2fx, max %.2fx over %d rounds; target <= 2x: %s)\n",
		workerStartName, workerPerStart[len(workerPerStart)/2].Round(time.Microsecond), floorPerStart[len(floorPerStart)/2].Round(time.Microsecond),
		startRatios[len(startRatios)/2], startRatios[0], startRatios[len(startRatios)-1], len(startRatios), metOrNot(startRatios[len(startRatios)/2] <= 2))
	if startRatios[len(startRatios)/2] > 2 {
		if p := workerInitProfile(workerLauncher.FloorCommand, 9); p != "" {
			fmt.Fprintln(o.Out, "what stands in the way of the worker start: "+p)
		}
	}
	if ddl := sorted(rounds, func(m matrixRound) float64 { return m.ddlRatio }); ddl[len(ddl)-1] > 0 {
		fmt.Fprintf(o.Out, "case databases copied from the migrated template (adapters/sqlite/template.db) instead of created by the schema's DDL in each case: a DDL round took median %.2fx the CPU of the template round next to it (min %.2fx, max %.2fx over %d rounds)\n",
			ddl[len(ddl)/2], ddl[0], ddl[len(ddl)-1], len(ddl))
	}
}

// wallFigure prints the full matrix's wall time over the rounds and
// returns its median.
func (o *sitting) wallFigure(rounds []matrixRound) time.Duration {
	walls := sorted(rounds, func(m matrixRound) time.Duration { return m.wall })
	median := walls[len(walls)/2]
	wallTarget := "no target for servers crashmatrix did not start"
	switch {
	case o.embedded:
		wallTarget = "target <= 5s on the embedded default: " + metOrNot(median <= 5*time.Second)
	case o.Name == "containers":
		wallTarget = "target <= 20s on a quiet machine: " + metOrNot(median <= 20*time.Second)
	}
	fmt.Fprintf(o.Out, "full matrix wall time: median %s, min %s, max %s over %d rounds (%s)\n",
		median.Round(time.Millisecond), walls[0].Round(time.Millisecond), walls[len(walls)-1].Round(time.Millisecond), len(walls), wallTarget)
	return median
}

// ToDoc runs run with its output (on out) also kept, then writes it into
// the section named section of the Markdown file doc, under a line that
// says when, on which commit and machine, and under what load it was
// measured, and with which arguments (args, less --doc and its value):
// the figures in the docs are what a run printed, never typed. A run that
// fails writes nothing.
func ToDoc(out io.Writer, doc, section string, args []string, run func(out io.Writer) error) error {
	old, err := os.ReadFile(doc)
	if err != nil {
		return fmt.Errorf("--doc %s: %w", doc, err)
	}
	start, loadBefore := time.Now().UTC(), docstest.LoadAverage()
	var buf bytes.Buffer
	if err := run(io.MultiWriter(out, &buf)); err != nil {
		return err
	}
	var shown []string
	for i := 0; i < len(args); i++ {
		if a := args[i]; a == "--doc" || a == "-doc" {
			i++
		} else if !strings.HasPrefix(a, "--doc=") {
			shown = append(shown, a)
		}
	}
	text := fmt.Sprintf("Written by `crashmatrix %s` on %s, %s, %s %s/%s, on %s; load average %s at the start, %s at the end.\n\n```text\n%s```\n",
		strings.Join(shown, " "), start.Format("2006-01-02 15:04 UTC"), benchCommit(doc), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		docstest.Machine(runtime.NumCPU()), loadBefore, docstest.LoadAverage(), buf.String())
	return os.WriteFile(doc, []byte(docstest.ReplaceSection(string(old), section, text)), 0o644)
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

// serverFaults measures each server's restart (SIGKILL to the first
// answered query, the server back on its data) and the wall time of the
// server-fault matrix (every window x server-crash, ack-lost, conn-reset x
// server).
func (o *sitting) serverFaults() error {
	out, ctx := o.Out, o.ctx
	for _, name := range o.Servers.Names() {
		var took []time.Duration
		for i := 0; i < o.Restarts; i++ {
			d, err := o.Servers.Crash(ctx, name)
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
	work, err := os.MkdirTemp(o.Dir, "crashmatrix-bench-")
	if err != nil {
		return err
	}
	cfg := sim.Config{Backend: sim.BackendSpec{Name: o.Backend}, Launcher: sim.BinaryLauncher{Path: o.Self}, WorkDir: work, LeaseTTL: o.LeaseTTL, Seed: 1}
	o.UseServerFaults(&cfg)
	r, err := sim.NewRunner(cfg)
	if err != nil {
		os.RemoveAll(work)
		return err
	}
	cases := catalogue.Lease(o.LeaseTTL).ServerMatrix()
	restartsBefore := len(o.Servers.Restarts())
	rep := r.RunAll(ctx, cases, o.Parallel, nil)
	matrixRestarts := o.Servers.Restarts()[restartsBefore:]
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
		len(cases), o.Parallel, crashes, len(matrixRestarts), rep.Took.Round(time.Millisecond), metOrNot(rep.Took <= 3*time.Minute))
	return nil
}

// cycles prints the kill-restart-recover cycle rate.
func (o *sitting) cycles() error {
	out := o.Out
	work, err := os.MkdirTemp(o.Dir, "crashmatrix-bench-")
	if err != nil {
		return err
	}
	r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: o.Backend}, Launcher: sim.BinaryLauncher{Path: o.Self}, WorkDir: work, LeaseTTL: o.CycleTTL, Seed: 7})
	if err != nil {
		os.RemoveAll(work)
		return err
	}
	rep := r.RunAll(o.ctx, catalogue.CycleCases(o.Cycles), o.CycleParallel, nil)
	if good := rep.Counts[verdict.Pass]; good != o.Cycles {
		report.WriteTerminal(out, rep, report.Options{Command: "bench"})
		return fmt.Errorf("%d of %d kill-restart-recover cycles did not pass (data in %s)", o.Cycles-good, o.Cycles, work)
	}
	os.RemoveAll(work)
	fmt.Fprintf(out, "kill-restart-recover cycles: %d in %s = %.1f cycles/s (%d at once, lease TTL %s; each cycle: a worker killed by SIGKILL after its graph write, a new worker recovers, invariants checked) (target >= 50/s: %s)\n",
		o.Cycles, rep.Took.Round(time.Millisecond), float64(o.Cycles)/rep.Took.Seconds(), o.CycleParallel, o.CycleTTL, metOrNot(float64(o.Cycles)/rep.Took.Seconds() >= 50))
	return nil
}

// storeWindows prints the wall time of the full matrix with the
// store's own windows (the probe run that finds them included) and kills
// random-instant kills, next to the plain matrix's median.
func (o *sitting) storeWindows(plain time.Duration) error {
	out := o.Out
	var walls []time.Duration
	for i := 0; i < o.Rounds; i++ {
		r, work, err := o.runner(int64(i+1), false)
		if err != nil {
			return err
		}
		start := time.Now()
		probe, err := r.Probe(o.ctx)
		if err != nil {
			r.CloseShared()
			os.RemoveAll(work)
			return fmt.Errorf("store windows round %d: %w", i+1, err)
		}
		cases := catalogue.Selection{RandomKills: o.RandomKills}.Cases(probe.Probe, catalogue.Lease(o.LeaseTTL), int64(i+1))
		rep := r.RunAll(o.ctx, cases, o.Parallel, nil)
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
		o.RandomKills, med.Round(time.Millisecond), walls[0].Round(time.Millisecond), walls[len(walls)-1].Round(time.Millisecond), len(walls), float64(med)/float64(plain), plain.Round(time.Millisecond), metOrNot(float64(med) <= 2*float64(plain)))
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
	cpu0 := tune.CPUTimeWithChildren()
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
	cpu := tune.CPUTimeWithChildren() - cpu0
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

// runner is one full-matrix round's runner, on a fresh work directory.
func (o *sitting) runner(seed int64, adaptive bool) (*sim.Runner, string, error) {
	return o.runnerWith(seed, adaptive, nil)
}

// runnerWith is runner with the configuration adjusted by set (when not
// nil) before the runner is made.
func (o *sitting) runnerWith(seed int64, adaptive bool, set func(*sim.Config)) (*sim.Runner, string, error) {
	work, err := os.MkdirTemp(o.Dir, "crashmatrix-bench-")
	if err != nil {
		return nil, "", err
	}
	cfg := sim.Config{Backend: sim.BackendSpec{Name: o.Backend}, Launcher: sim.BinaryLauncher{Path: o.Self}, WorkDir: work, LeaseTTL: o.LeaseTTL, Seed: seed, Adaptive: adaptive}
	if set != nil {
		set(&cfg)
	}
	// The servers reached as certify reaches them: a case that arms no
	// server fault goes to them directly, one that does through its proxy.
	o.UseServerFaults(&cfg)
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
