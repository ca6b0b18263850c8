package explorerun

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/explore"
	"github.com/crashmatrix/crashmatrix/sim/initial"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// ExploreOptions are a run of crashmatrix explore, its flags checked and
// its backend set up.
type ExploreOptions struct {
	// Config is the run on the real store (its store command's recovery
	// and, with processes, its server faults in place); Backend is the
	// backend's name as the run prints it.
	Config  sim.Config
	Backend string
	// Processes kills real worker processes (explore --processes).
	Processes bool
	// SimStore, when set, is the simulated durable store explored on
	// (explore --sim-store: sim/embedded's SimStore), a finding replayed
	// on Config's store.
	SimStore *sim.Backend
	// Schedule, when set, is the fault schedule of From shrunk instead
	// of a search (it runs under the settings it was found with); From
	// names the scenario file (--from) either way.
	Schedule *scenarios.Scenario
	From     string

	Seed                   int64
	ShardIndex, ShardCount int
	Budget                 time.Duration
	Max, Parallel, Confirm int
	// Target is the invariant hunted, by its short name ("" for any).
	Target string
	// The shares of the schedules' faults (explore.Shape) the flags ask
	// for, and the tear of a torn write.
	RandomKills, PowerLoss, TornWrite, DiskErrors float64
	Tear                                          int
	// ServerHolds is the share of server faults that hold a worker's
	// request past its lease instead (explore.Shape.ServerHolds).
	ServerHolds float64
	// Servers carries out server faults (nil: none).
	Servers ServerFaults
	// OutDir is where the shrunk scenario is written; Replay makes the
	// command that replays the file at a path.
	OutDir string
	Replay func(path string) string
	// Progress, when set, starts the progress lines of a search outside
	// a terminal, or returns nil.
	Progress func() *sim.ProgressLog
	Out, Err io.Writer
}

// exploration is one run of Explore.
type exploration struct {
	o      ExploreOptions
	ctx    context.Context
	runner *sim.Runner
	real   sim.Config // the real store, which findings of SimStore are replayed on
	mode   string
	shape  explore.Shape
}

// Explore runs crashmatrix explore: it searches o.Seed's fault schedules
// (or shrinks o.Schedule) for a violation, shrinks the first, writes it as
// a scenario file and prints the replay command. It returns the command's
// exit code: 0 nothing found, 1 a violation, 2 a run that could not
// vouch for itself (said on o.Err) or was interrupted.
func Explore(ctx context.Context, o ExploreOptions) (int, error) {
	e := &exploration{o: o, ctx: ctx, real: o.Config}
	cfg := o.Config
	if o.SimStore != nil {
		cfg.Use, cfg.SimulatedStore, e.o.Backend = o.SimStore, true, o.SimStore.Name
	}
	if o.Schedule != nil {
		// The schedule runs under the settings it was found with.
		cfg = o.Schedule.Apply(cfg)
		e.o.Seed = cfg.Seed
	}
	e.o.Config = cfg
	runner, err := sim.NewRunner(cfg)
	if err != nil {
		fmt.Fprintln(o.Err, "crashmatrix:", err)
		return 2, nil
	}
	defer runner.CloseShared()
	e.runner = runner
	e.mode = "in-process"
	if o.Processes {
		e.mode = "process kills"
	}
	if o.SimStore != nil {
		e.mode = "in-process on the SIMULATED durable store (--sim-store)"
	}
	if code := e.probe(); code != 0 {
		return code, nil
	}
	if e.o.Parallel <= 0 {
		e.o.Parallel = 4 * runtime.NumCPU()
	}
	var start *initial.State
	if o.Schedule == nil {
		var code int
		if start, code, err = e.from(); code != 0 || err != nil {
			return code, err
		}
	}
	e.serverFaults()
	res := e.search(start)
	return e.finish(res)
}

// probe runs the probe, which finds the windows the store declares
// (schedules arm them too) and measures the run random kills are drawn
// over, makes the schedules' shape of it and prints the run's head line.
func (e *exploration) probe() int {
	o := e.o
	probe, err := e.runner.Probe(e.ctx)
	if err != nil {
		// A store that fails without faults is what exploring will
		// show too; the windows found so far still count.
		fmt.Fprintf(o.Err, "crashmatrix: warning: %v\n", err)
	}
	e.shape = Shape(probe.Probe)
	e.shape.RandomKill, e.shape.KillBase = o.RandomKills, probe.Base
	e.shape.KillCalls, e.shape.KillCommits = probe.Calls, probe.Commits
	if o.PowerLoss > 0 {
		if why := e.runner.PowerLossUntested(); why != "" {
			fmt.Fprintf(o.Err, "crashmatrix: --power-loss: %s\n", sim.PowerLossNotTested(why))
			return 2
		}
		e.shape.PowerLoss, e.shape.TornWrite, e.shape.Tear = o.PowerLoss, o.TornWrite, o.Tear
	}
	if o.DiskErrors > 0 {
		if !e.runner.Backend().Embedded {
			// The matrix runs them on servers (PostgreSQL's data mount);
			// no test has run them in explore's schedules there.
			fmt.Fprintf(o.Err, "crashmatrix: --disk-errors: not tested on backend %s (explore draws disk errors on an embedded backend or a --store-cmd store; certify --kind fsync-error, disk-full or slow-sync runs them on --backend containers)\n", o.Backend)
			return 2
		}
		sel := catalogue.Selection{Kinds: faults.DiskKinds}
		if _, err := e.runner.PowerLossSelection(&sel); err != nil {
			fmt.Fprintf(o.Err, "crashmatrix: --disk-errors: %v\n", err)
			return 2
		}
		e.shape.DiskErrors = o.DiskErrors
	}
	fmt.Fprintf(o.Out, "exploring: seed %d, shard %d/%d, budget %s, backend %s, %s, %d store windows", o.Seed, o.ShardIndex, o.ShardCount, o.Budget, o.Backend, e.mode, len(probe.Windows))
	if o.RandomKills > 0 {
		fmt.Fprintf(o.Out, ", random kills on %.0f%% of clients over %d store calls and %d commits (%s)", 100*o.RandomKills, probe.Calls, probe.Commits, probe.Base.Round(time.Millisecond))
	}
	fmt.Fprintln(o.Out)
	if o.SimStore != nil {
		fmt.Fprintln(o.Out, "the simulated store is no store: a model where every store call that returned survives a simulated crash and nothing else does; it finds protocol bugs, never certifies, and what it finds is replayed on SQLite")
	}
	return 0
}

// serverFaults lets the schedules arm server faults (process kills only).
func (e *exploration) serverFaults() {
	if e.o.Servers == nil || e.o.Config.ServerFaults == nil {
		return
	}
	e.shape.Servers = e.o.Servers.Names()
	for _, n := range e.shape.Servers {
		if !e.o.Servers.Can(faults.ServerCrash, n) {
			e.shape.NoCrash = append(e.shape.NoCrash, n)
		}
	}
	e.shape.ServerHolds, e.shape.Holds = e.o.ServerHolds, serverHoldKinds(e.o.Servers, e.shape.Servers)
}

// ServerFaults is what carries out the server faults of the schedules
// (serverfaults.Supervisor): an interface, so that the exploration behind
// properties.CertifyCrashSafety links no fault proxy (toxiproxy).
type ServerFaults interface {
	// Names are the servers it faults.
	Names() []string
	// Can says whether it can carry out the fault of kind on a server.
	Can(kind faults.Kind, server string) bool
}

// serverHoldKinds are, for each server, the faults holding a request past
// the lease (faults.ServerOptInKinds) its supervisor can carry out.
func serverHoldKinds(sup ServerFaults, servers []string) map[string][]faults.Kind {
	out := map[string][]faults.Kind{}
	for _, n := range servers {
		for _, k := range faults.ServerOptInKinds {
			if sup.Can(k, n) {
				out[n] = append(out[n], k)
			}
		}
	}
	return out
}

// search shrinks the schedule of o.Schedule, or searches the seed's
// schedules from start, and prints what it ran.
func (e *exploration) search(start *initial.State) explore.Result {
	o := e.o
	var res explore.Result
	// Outside a terminal (a CI log): a line at each tenth of the
	// search (of --max, or of --budget) and every 10 s.
	var plog *sim.ProgressLog
	var each func(verdict.CaseResult)
	if o.Schedule == nil && o.Progress != nil {
		if plog = o.Progress(); plog != nil {
			each = plog.Case
		}
	}
	last := time.Now()
	if o.Schedule != nil {
		fmt.Fprintf(o.Out, "from %s: its schedule, %s, shrunk while it breaks %s\n", o.From, explore.Describe(o.Schedule.Case()), cmp.Or(o.Target, "the first invariant it breaks"))
		res = explore.ShrinkCase(e.ctx, e.runner, o.Schedule.Case(), o.Target, o.Confirm)
	} else {
		res = explore.Run(e.ctx, e.runner, explore.Options{Seed: o.Seed, Budget: o.Budget, MaxSchedules: o.Max, ShardIndex: o.ShardIndex, ShardCount: o.ShardCount,
			Confirm: o.Confirm, Parallel: o.Parallel, Target: o.Target, Shape: e.shape, Initial: start, Each: each, Progress: func(n int) {
				if plog == nil && time.Since(last) > 5*time.Second {
					last = time.Now()
					fmt.Fprintf(o.Err, "  %d schedules…\n", n)
				}
			}})
	}
	if plog != nil {
		plog.Stop()
	}
	if o.Schedule != nil {
		fmt.Fprintf(o.Out, "ran and shrunk in %s", res.Took.Round(time.Millisecond))
	} else {
		fmt.Fprintf(o.Out, "%d schedules in %s (%.0f/s)", res.Schedules, res.Took.Round(time.Millisecond), res.Rate())
	}
	if res.Other > 0 {
		fmt.Fprintf(o.Out, ", %d broke other invariants than %s", res.Other, o.Target)
	}
	fmt.Fprintln(o.Out)
	return res
}

// finish says what the search found: nothing (exit 0, or 2 when it was
// interrupted before its budget was spent), or a finding, written as a
// scenario (exit 1).
func (e *exploration) finish(res explore.Result) (int, error) {
	o := e.o
	f := res.Finding
	if f == nil {
		if o.Schedule != nil {
			fmt.Fprintf(o.Out, "the schedule of %s broke nothing to shrink this time (verdict in the line above; %d undecided, %d broke another invariant than %s)\n", o.From, res.Skipped, res.Other, o.Target)
			return 0, nil
		}
		if e.ctx.Err() != nil {
			// Interrupted (SIGINT, SIGTERM: a cancelled CI job): the
			// budget was not spent, so "nothing found" would claim
			// more than was searched.
			fmt.Fprintf(o.Out, "interrupted: no violation in the %d schedules run (seed %d); not the search asked for\n", res.Schedules, o.Seed)
			return 2, nil
		}
		fmt.Fprintf(o.Out, "no violation found (seed %d)\n", o.Seed)
		return 0, nil
	}
	f.Shrunk.ID = fmt.Sprintf("explored-s%d-%d-%s", o.Seed, f.Index, strings.ToLower(f.Invariant))
	if o.Schedule != nil {
		f.Shrunk.ID = o.Schedule.Name + "-shrunk"
	}
	var onReal realReplay
	if o.SimStore != nil {
		var err error
		if onReal, err = replayOnRealStore(e.ctx, e.real, f); err != nil {
			return 0, err
		}
	}
	return e.write(f, onReal)
}

// write writes the finding f as a scenario file and prints it, with how
// it did on the real store (onReal) for a finding of the simulated one.
func (e *exploration) write(f *explore.Finding, onReal realReplay) (int, error) {
	o := e.o
	sc, inv, err := e.scenario(f, onReal)
	if err != nil {
		return 0, err
	}
	head := ""
	if o.SimStore != nil {
		head = "# " + onReal.String() + "\n"
	}
	path, replay, err := Write(o.OutDir, sc, inv, Shown(f), head, o.Replay)
	if err != nil {
		return 0, err
	}
	what := "VIOLATION"
	if o.SimStore != nil {
		what = "VIOLATION (simulated store)"
		if onReal.Reproduced == 0 {
			what = "VIOLATION ON THE SIMULATED STORE ONLY"
		}
	}
	if o.Schedule != nil {
		fmt.Fprintf(o.Out, "%s %s in the schedule of %s\n", what, inv, o.From)
	} else {
		fmt.Fprintf(o.Out, "%s %s in schedule %d of seed %d, found after %s\n", what, inv, f.Index, o.Seed, f.FoundAfter.Round(time.Millisecond))
	}
	for _, v := range f.Result.Violations {
		fmt.Fprintf(o.Out, "  %s\n", v)
	}
	fmt.Fprintf(o.Out, "shrunk from %s to %s in %s (%d reductions); reproduced %d/%d\n", explore.Describe(f.Original), explore.Describe(f.Shrunk),
		(f.ShrunkAfter - f.FoundAfter).Round(time.Millisecond), f.ShrinkSteps, f.Reproduced, f.Reruns)
	if o.SimStore != nil {
		fmt.Fprintln(o.Out, onReal.String())
	}
	fmt.Fprintf(o.Out, "scenario: %s\nreplay:   %s\n", path, replay)
	return 1, nil
}

// scenario is the scenario file of the finding f: the schedule that
// broke the invariant on the real store when the simulated one found it.
func (e *exploration) scenario(f *explore.Finding, onReal realReplay) (*scenarios.Scenario, check.Invariant, error) {
	o := e.o
	written := f.Shrunk
	if onReal.Case != nil {
		written = *onReal.Case // the schedule that breaks it on the real store
		written.ID = f.Shrunk.ID
	}
	fw := *f
	fw.Shrunk = written
	cfg := o.Config
	sc, inv, err := Scenario(&fw, Settings{Bugs: cfg.Bugs, Mutant: cfg.Mutant, Seed: o.Seed, Mode: e.mode,
		By: fmt.Sprintf("crashmatrix explore --seed %d", o.Seed)})
	if err != nil {
		return nil, inv, err
	}
	switch {
	case o.Schedule != nil:
		sc.Backend, sc.LeaseTTL, sc.Initial = o.Schedule.Backend, o.Schedule.LeaseTTL, o.Schedule.Initial
		sc.Description = fmt.Sprintf("The schedule of %s (%s), shrunk by crashmatrix explore --from to %s; breaks %s.",
			o.From, e.mode, explore.Describe(f.Shrunk), inv)
	case o.From != "":
		sc.Description += " Starts from the initial state of " + o.From + "."
	}
	if o.SimStore != nil {
		sc.Description += " " + onReal.String()
	}
	return sc, inv, nil
}

// from loads the initial state of o.From (nil without it) and runs it
// once with recovery only, so that a state that breaks an invariant
// before any fault is said up front: every schedule would then find it.
// With o.Target naming one the baseline does not break, the search goes
// on for that one. A code other than 0 ends the run with it.
func (e *exploration) from() (*initial.State, int, error) {
	o := e.o
	if o.From == "" {
		return nil, 0, nil
	}
	sc, err := scenarios.Load(o.From)
	if err != nil {
		fmt.Fprintln(o.Err, err)
		return nil, 2, nil
	}
	if sc.Initial == nil {
		return nil, 0, fmt.Errorf("--from %s: the scenario has no initial block (crashmatrix snapshot writes one)", o.From)
	}
	base := scenarios.FromState("baseline", "", sc.Initial).Case()
	res := e.runner.RunCase(e.ctx, base)
	fmt.Fprintf(o.Out, "from %s: %d operations (%d unfinished), %d documents; with recovery only: %s %v\n",
		o.From, len(sc.Initial.Operations), len(sc.Initial.Unfinished()), len(sc.Initial.Documents), res.Verdict, res.Broken())
	switch {
	case res.Verdict == verdict.Undecided:
		fmt.Fprintf(o.Err, "crashmatrix: the initial state does not run: %s\n", strings.Join(res.Notes, "; "))
		return nil, 2, nil
	case res.Verdict == verdict.Fail && (o.Target == "" || slices.Contains(res.Broken(), o.Target)):
		for _, v := range res.Violations {
			fmt.Fprintf(o.Out, "  %s\n", v)
		}
		fmt.Fprintf(o.Out, "the initial state breaks %s before any fault: replay it with crashmatrix run %s (or hunt another invariant with --invariant)\n", strings.Join(res.Broken(), ","), o.From)
		return nil, 1, nil
	}
	return sc.Initial, 0, nil
}
