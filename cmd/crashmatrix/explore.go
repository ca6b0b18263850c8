package main

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/explorerun"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/explore"
	"github.com/crashmatrix/crashmatrix/sim/initial"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/spf13/cobra"
)

func exploreCmd() *cobra.Command {
	var (
		seed                       int64
		budget                     time.Duration
		max, parallel, confirm     int
		shard, backendName, outDir string
		target, mutant, workdir    string
		from                       string
		bugs                       []string
		processes, files, simStore bool
		randomKills                float64
		powerLoss                  float64
		tornWrite                  float64
		diskErrors                 float64
		serverHolds                float64
		tear                       int
		server                     serverFlags
		store                      storeCmdFlags
	)
	cmd := &cobra.Command{
		Use:   "explore --seed N --budget 5m",
		Short: "Search random fault schedules for invariant violations, shrink the first one, write it as a scenario",
		Long: `explore generates fault schedules (gopter generators: several workers and
documents, repeated crashes, crashes during recovery, pauses past the lease,
retractions racing ingestions), runs each and checks I1-I9. On a violation it
shrinks the schedule (fewer workers, actions and faults; each candidate re-run
--confirm times so a flaky shrink is rejected), writes the minimal scenario file
and prints the replay command. One seed decides the run and is always printed;
--shard i/n runs every n-th schedule from i, so n machines split one seed.

--sim-store explores the protocol on a simulated durable store instead of
the real one: the memory stores shared by a case's simulated processes, where
every store call that returned is committed and survives a simulated crash and
nothing else does. It is several times faster and finds protocol bugs, not
store bugs; it never certifies anything. A violation it finds is shrunk on it,
then replayed on the real store (SQLite, in-process); the output and the
scenario file say how often it broke there, and one that never did is marked
as a finding of the simulated store only.

Exit code: 0 nothing found within the budget, 1 a violation (scenario written), 2 error or interrupted (SIGINT, SIGTERM) before the budget was spent,
or a setup the run cannot vouch for (a flag empty, out of range or for another backend; a --workdir another run is using).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			release, err := lockWorkdir(cmd, workdir)
			if err != nil {
				return err
			}
			defer release()
			si, sn := 0, 1
			if shard != "" {
				s, err := catalogue.ParseShard(shard)
				if err != nil {
					return err
				}
				si, sn = s.Index, s.Count
			}
			if target != "" {
				inv, err := check.ParseInvariant(target)
				if err != nil {
					return fmt.Errorf("--invariant: %w", err)
				}
				target = inv.Short()
			}
			if err := faults.CheckTear(tear); err != nil {
				return fmt.Errorf("--tear: %w", err)
			}
			switch {
			case tornWrite > 0 && powerLoss == 0:
				return fmt.Errorf("--torn-write %v is a share of the power losses: give --power-loss too", tornWrite)
			case tear != faults.TearPage && tornWrite == 0:
				return fmt.Errorf("--tear %d applies to torn writes: give --torn-write too", tear)
			}
			if randomKills > 0 && !processes {
				return fmt.Errorf("--random-kills needs --processes: a goroutine cannot be stopped at an instant")
			}
			if simStore {
				switch {
				case processes:
					return fmt.Errorf("--sim-store runs in process: the simulated store lives in the explorer's memory (drop --processes)")
				case files:
					return fmt.Errorf("--sim-store keeps no database: drop --in-process-files")
				case cmd.Flags().Changed("backend") && backendName != "sqlite":
					return fmt.Errorf("--sim-store replays its findings on SQLite: drop --backend %s", backendName)
				case powerLoss > 0 || diskErrors > 0:
					return fmt.Errorf("--power-loss and --disk-errors need a real store on a real file system: drop --sim-store")
				case mutant != "" && mutant != sim.MutantCreateNotMerge:
					return fmt.Errorf("--mutant %s: the simulated store models %s only (drop --sim-store to explore it)", mutant, sim.MutantCreateNotMerge)
				}
			}
			bs, err := parseBugs(bugs)
			if err != nil {
				return err
			}
			schedule, err := scheduleFrom(cmd, from, processes)
			if err != nil {
				return err
			}
			// A store in any language (--store-cmd) runs as a child of each
			// worker process: only --processes can kill it with its worker.
			spec, err := store.spec(!processes)
			if err != nil {
				return err
			}
			// PostgreSQL's clock made movable (libfaketime) only when the
			// schedules may jump it.
			server.clockJump = serverHolds > 0
			backend, self, cleanup, err := server.setUp(cmd, backendName)
			if err != nil {
				return err
			}
			defer cleanup()
			if spec.Name == "" {
				spec.Name = backend
			} else {
				backend = spec.Name
			}
			if workdir == "" {
				base := sim.CaseRoot()
				if workdir, err = os.MkdirTemp(base, "crashmatrix-explore-"); err != nil {
					return err
				}
				defer os.RemoveAll(workdir)
			}
			cfg := sim.Config{Backend: spec, Launcher: sim.BinaryLauncher{Path: self},
				WorkDir: workdir, InProcess: !processes, InProcessFiles: files, Seed: seed, Bugs: bs, Mutant: mutant}
			store.useRecovery(&cfg)
			real := cfg // the real store, which findings of --sim-store are replayed on
			if simStore {
				b := embedded.SimStore()
				cfg.Use, cfg.SimulatedStore, backend = &b, true, b.Name
			}
			if processes {
				server.useFaults(&cfg)
			}
			if schedule != nil {
				// The schedule runs under the settings it was found with.
				cfg = schedule.Apply(cfg)
				bs, mutant, seed = cfg.Bugs, cfg.Mutant, cfg.Seed
			}
			runner, err := sim.NewRunner(cfg)
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "crashmatrix:", err)
				return exitError{2}
			}
			defer runner.CloseShared()
			defer tuneGC(!processes)()
			mode := "in-process"
			if processes {
				mode = "process kills"
			}
			if simStore {
				mode = "in-process on the SIMULATED durable store (--sim-store)"
			}
			// The probe finds the windows the store declares (schedules arm
			// them too) and measures the run random kills are drawn over.
			probe, err := runner.Probe(cmd.Context())
			if err != nil {
				// A store that fails without faults is what exploring will
				// show too; the windows found so far still count.
				fmt.Fprintf(cmd.ErrOrStderr(), "crashmatrix: warning: %v\n", err)
			}
			shape := explorerun.Shape(probe.Probe)
			shape.RandomKill, shape.KillBase = randomKills, probe.Base
			shape.KillCalls, shape.KillCommits = probe.Calls, probe.Commits
			if powerLoss > 0 {
				if why := runner.PowerLossUntested(); why != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "crashmatrix: --power-loss: %s\n", sim.PowerLossNotTested(why))
					return exitError{2}
				}
				shape.PowerLoss, shape.TornWrite, shape.Tear = powerLoss, tornWrite, tear
			}
			if diskErrors > 0 {
				sel := catalogue.Selection{Kinds: faults.DiskKinds}
				if _, err := runner.PowerLossSelection(&sel); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "crashmatrix: --disk-errors: %v\n", err)
					return exitError{2}
				}
				shape.DiskErrors = diskErrors
			}
			fmt.Fprintf(out, "exploring: seed %d, shard %d/%d, budget %s, backend %s, %s, %d store windows", seed, si, sn, budget, backend, mode, len(probe.Windows))
			if randomKills > 0 {
				fmt.Fprintf(out, ", random kills on %.0f%% of clients over %d store calls and %d commits (%s)", 100*randomKills, probe.Calls, probe.Commits, probe.Base.Round(time.Millisecond))
			}
			fmt.Fprintln(out)
			if simStore {
				fmt.Fprintln(out, "the simulated store is no store: a model where every store call that returned survives a simulated crash and nothing else does; it finds protocol bugs, never certifies, and what it finds is replayed on SQLite")
			}
			last := time.Now()
			if parallel <= 0 {
				parallel = 4 * runtime.NumCPU()
			}
			var start *initial.State
			if schedule == nil {
				if start, err = exploreFrom(cmd, runner, from, target); err != nil {
					return err
				}
			}
			if serverHolds > 0 && (server.faults == nil || cfg.ServerFaults == nil) {
				fmt.Fprintln(cmd.ErrOrStderr(), "crashmatrix: --server-holds: this run faults no server (it needs a server backend, --processes, and its servers' fault proxies)")
				return exitError{2}
			}
			if server.faults != nil && cfg.ServerFaults != nil {
				// Server faults join the schedules (process kills only).
				shape.Servers = server.faults.Names()
				for _, n := range shape.Servers {
					if !server.faults.Can(faults.ServerCrash, n) {
						shape.NoCrash = append(shape.NoCrash, n)
					}
				}
				shape.ServerHolds, shape.Holds = serverHolds, serverHoldKinds(server.faults, shape.Servers)
			}
			var res explore.Result
			// Outside a terminal (a CI log): a line at each tenth of the
			// search (of --max, or of --budget) and every 10 s.
			var plog *sim.ProgressLog
			var each func(verdict.CaseResult)
			if schedule == nil {
				if plog = progressLog(out, "explore", "schedules", max, budget); plog != nil {
					each = plog.Case
				}
			}
			if schedule != nil {
				fmt.Fprintf(out, "from %s: its schedule, %s, shrunk while it breaks %s\n", from, explore.Describe(schedule.Case()), cmp.Or(target, "the first invariant it breaks"))
				res = explore.ShrinkCase(cmd.Context(), runner, schedule.Case(), target, confirm)
			} else {
				res = explore.Run(cmd.Context(), runner, explore.Options{Seed: seed, Budget: budget, MaxSchedules: max, ShardIndex: si, ShardCount: sn,
					Confirm: confirm, Parallel: parallel, Target: target, Shape: shape, Initial: start, Each: each, Progress: func(n int) {
						if plog == nil && time.Since(last) > 5*time.Second {
							last = time.Now()
							fmt.Fprintf(cmd.ErrOrStderr(), "  %d schedules…\n", n)
						}
					}})
			}
			if plog != nil {
				plog.Stop()
			}
			if schedule != nil {
				fmt.Fprintf(out, "ran and shrunk in %s", res.Took.Round(time.Millisecond))
			} else {
				fmt.Fprintf(out, "%d schedules in %s (%.0f/s)", res.Schedules, res.Took.Round(time.Millisecond), res.Rate())
			}
			if res.Other > 0 {
				fmt.Fprintf(out, ", %d broke other invariants than %s", res.Other, target)
			}
			fmt.Fprintln(out)
			f := res.Finding
			if f == nil {
				if schedule != nil {
					fmt.Fprintf(out, "the schedule of %s broke nothing to shrink this time (verdict in the line above; %d undecided, %d broke another invariant than %s)\n", from, res.Skipped, res.Other, target)
					return nil
				}
				if cmd.Context().Err() != nil {
					// Interrupted (SIGINT, SIGTERM: a cancelled CI job): the
					// budget was not spent, so "nothing found" would claim
					// more than was searched.
					fmt.Fprintf(out, "interrupted: no violation in the %d schedules run (seed %d); not the search asked for\n", res.Schedules, seed)
					return exitError{2}
				}
				fmt.Fprintf(out, "no violation found (seed %d)\n", seed)
				return nil
			}
			f.Shrunk.ID = fmt.Sprintf("explored-s%d-%d-%s", seed, f.Index, strings.ToLower(f.Invariant))
			if schedule != nil {
				f.Shrunk.ID = schedule.Name + "-shrunk"
			}
			var onReal realReplay
			if simStore {
				if onReal, err = replayOnRealStore(cmd, real, f); err != nil {
					return err
				}
			}
			written := f.Shrunk
			if onReal.Case != nil {
				written = *onReal.Case // the schedule that breaks it on the real store
				written.ID = f.Shrunk.ID
			}
			fw := *f
			fw.Shrunk = written
			sc, inv, err := explorerun.Scenario(&fw, explorerun.Settings{Bugs: bs, Mutant: mutant, Seed: seed, Mode: mode,
				By: fmt.Sprintf("crashmatrix explore --seed %d", seed)})
			if err != nil {
				return err
			}
			switch {
			case schedule != nil:
				sc.Backend, sc.LeaseTTL, sc.Initial = schedule.Backend, schedule.LeaseTTL, schedule.Initial
				sc.Description = fmt.Sprintf("The schedule of %s (%s), shrunk by crashmatrix explore --from to %s; breaks %s.",
					from, mode, explore.Describe(f.Shrunk), inv)
			case from != "":
				sc.Description += " Starts from the initial state of " + from + "."
			}
			head := ""
			if simStore {
				sc.Description += " " + onReal.String()
				head = "# " + onReal.String() + "\n"
			}
			path, replay, err := explorerun.Write(outDir, sc, inv, explorerun.Shown(f), head, func(path string) string {
				replay := []string{selfCommand(), "run", shellQuote(path), "--repeat", "10"}
				if args := store.replayArgs(); args != nil {
					replay = append(replay, args...)
				} else if backendName != "sqlite" {
					replay = append(replay, "--backend", shellQuote(backendName))
				}
				if !processes {
					replay = append(replay, "--in-process")
				}
				return strings.Join(replay, " ")
			})
			if err != nil {
				return err
			}
			what := "VIOLATION"
			if simStore {
				what = "VIOLATION (simulated store)"
				if onReal.Reproduced == 0 {
					what = "VIOLATION ON THE SIMULATED STORE ONLY"
				}
			}
			if schedule != nil {
				fmt.Fprintf(out, "%s %s in the schedule of %s\n", what, inv, from)
			} else {
				fmt.Fprintf(out, "%s %s in schedule %d of seed %d, found after %s\n", what, inv, f.Index, seed, f.FoundAfter.Round(time.Millisecond))
			}
			for _, v := range f.Result.Violations {
				fmt.Fprintf(out, "  %s\n", v)
			}
			fmt.Fprintf(out, "shrunk from %s to %s in %s (%d reductions); reproduced %d/%d\n", explore.Describe(f.Original), explore.Describe(f.Shrunk),
				(f.ShrunkAfter - f.FoundAfter).Round(time.Millisecond), f.ShrinkSteps, f.Reproduced, f.Reruns)
			if simStore {
				fmt.Fprintln(out, onReal.String())
			}
			fmt.Fprintf(out, "scenario: %s\nreplay:   %s\n", path, replay)
			return exitError{1}
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&seed, "seed", 1, "the seed that decides the run")
	fl.DurationVar(&budget, "budget", time.Minute, "how long to search")
	fl.IntVar(&max, "max", 0, "stop after this many schedules (0: budget only)")
	fl.StringVar(&shard, "shard", "", "i/n: run schedules i, i+n, i+2n, … of the seed")
	fl.StringVar(&backendName, "backend", "sqlite", "backend")
	store.register(fl, false)
	fl.BoolVar(&processes, "processes", false, "kill real worker processes instead of the in-process mode")
	fl.Float64Var(&tornWrite, "torn-write", 0, "share (0..1) of those power losses that tear: of each file, some 4 KiB pages written and not fsynced survive and the rest are lost")
	fl.IntVar(&tear, "tear", faults.TearPage, "what a torn write keeps or loses whole: 4096 (pages), 512 (disk sectors: a page can survive in part) or a smaller power of two down to 1 (a tear inside one sector)")
	fl.Float64Var(&serverHolds, "server-holds", 0, "share (0..1) of server faults that hold the worker's request past its lease instead (server-pause, partition or clock-jump, where the server can take it: server-pause and clock-jump on containers crashmatrix started; at most one per schedule); needs a server backend with server faults")
	fl.Float64Var(&diskErrors, "disk-errors", 0, "share (0..1) of armed crashes that become disk errors instead (fsync-error, disk-full or slow-sync, one drawn; at most one per client); needs --processes, an embedded backend or --store-cmd, and FUSE")
	fl.Float64Var(&powerLoss, "power-loss", 0, "share (0..1) of armed crashes that cut the power instead (every process of the schedule dies and what was not fsynced is lost); needs --processes, an embedded backend and FUSE")
	fl.Float64Var(&randomKills, "random-kills", 0, "share (0..1) of client workers SIGKILLed at a random instant of their run (before a store call or inside a commit, drawn over the probe's counts) besides failpoints; needs --processes")
	fl.BoolVar(&simStore, "sim-store", false, "explore on a SIMULATED durable store (memory stores: commits survive a simulated crash, nothing else does), several times faster; protocol bugs only, never a certification; a finding is replayed on SQLite and labelled with how often it broke there")
	fl.BoolVar(&files, "in-process-files", false, "keep the embedded database in a file in the in-process mode too (by default it lives in memory there)")
	fl.IntVar(&parallel, "parallel", 0, "schedules at once (default 4 per core)")
	fl.IntVar(&confirm, "confirm", 3, "re-runs a shrink candidate must fail in")
	fl.StringVar(&target, "invariant", "", "hunt for this invariant only ("+check.All[0].Short()+".."+check.All[len(check.All)-1].Short()+")")
	fl.StringSliceVar(&bugs, "bug", nil, "run the reference as a mutant: "+bugNames())
	fl.StringVar(&mutant, "mutant", "", "backend mutant: "+sim.MutantCreateNotMerge+", "+sim.MutantNoUniqueConstraint+", "+sim.MutantLostCommitIsFailure+" (PostgreSQL: a lost COMMIT reply reported as a definite failure), "+sim.MutantRenewIgnoresHolder+" (SQL stores: a lease renewal that ignores the holder and its token)")
	fl.StringVar(&outDir, "out", "crashmatrix-findings", "where the shrunk scenario is written")
	fl.StringVar(&workdir, "workdir", "", "scratch directory, one run at a time (a second run on the folder exits 2) (default: a temporary one, under TMPDIR when set, else on /dev/shm when it has 1 GiB free)")
	fl.StringVar(&from, "from", "", "start every schedule from the initial block of this scenario file (crashmatrix snapshot writes one); a scenario whose steps arm faults (a random kill's finding) is shrunk instead, under its bugs, mutant, seed and lease TTL")
	server.register(fl)
	cmd.PreRunE = checkFlags
	return cmd
}

// scheduleFrom returns the scenario of --from when it holds a fault
// schedule (a step that arms a fault or a kill: a random kill's finding, a
// library scenario), which explore then shrinks instead of searching; nil
// for none or a scenario without faults (an initial state to start from).
func scheduleFrom(cmd *cobra.Command, from string, processes bool) (*scenarios.Scenario, error) {
	if from == "" {
		return nil, nil
	}
	sc, err := scenarios.Load(from)
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), err)
		return nil, exitError{2}
	}
	if !slices.ContainsFunc(sc.Steps, func(st scenarios.Step) bool { return len(st.Faults) > 0 || st.Kill != nil }) {
		return nil, nil // a state to start from (crashmatrix snapshot's recovery-only steps)
	}
	if !processes && slices.ContainsFunc(sc.Case().Steps, func(st catalogue.Step) bool {
		_, commit := st.Arms[faults.StoreCommit]
		return commit || st.Kill != nil
	}) {
		return nil, fmt.Errorf("--from %s: its schedule kills a worker inside a store call (storeCommit, or a wall-clock kill): that needs --processes", from)
	}
	return sc, nil
}

// exploreFrom loads the initial state of --from (nil without it) and runs
// it once with recovery only, so that a state that breaks an invariant
// before any fault is said up front: every schedule would then find it.
// With --invariant naming one the baseline does not break, the search goes
// on for that one.
func exploreFrom(cmd *cobra.Command, runner *sim.Runner, from, target string) (*initial.State, error) {
	if from == "" {
		return nil, nil
	}
	sc, err := scenarios.Load(from)
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), err)
		return nil, exitError{2}
	}
	if sc.Initial == nil {
		return nil, fmt.Errorf("--from %s: the scenario has no initial block (crashmatrix snapshot writes one)", from)
	}
	base := scenarios.FromState("baseline", "", sc.Initial).Case()
	res := runner.RunCase(cmd.Context(), base)
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "from %s: %d operations (%d unfinished), %d documents; with recovery only: %s %v\n",
		from, len(sc.Initial.Operations), len(sc.Initial.Unfinished()), len(sc.Initial.Documents), res.Verdict, res.Broken())
	switch {
	case res.Verdict == verdict.Undecided:
		fmt.Fprintf(cmd.ErrOrStderr(), "crashmatrix: the initial state does not run: %s\n", strings.Join(res.Notes, "; "))
		return nil, exitError{2}
	case res.Verdict == verdict.Fail && (target == "" || slices.Contains(res.Broken(), target)):
		for _, v := range res.Violations {
			fmt.Fprintf(out, "  %s\n", v)
		}
		fmt.Fprintf(out, "the initial state breaks %s before any fault: replay it with crashmatrix run %s (or hunt another invariant with --invariant)\n", strings.Join(res.Broken(), ","), from)
		return nil, exitError{1}
	}
	return sc.Initial, nil
}

// realReplays is how many times a finding of --sim-store is run on the
// real store.
const realReplays = 10

// realReplay is what a finding of the simulated store did on the real one.
type realReplay struct {
	Invariant          string
	Reproduced, Reruns int
	// Original is set when the shrunk schedule never broke the invariant
	// on the real store and the original, unshrunk one did.
	Original bool
	// Moved, when set, says how a stall before the k-th store call was
	// moved for the real store, which counts its calls differently.
	Moved string
	// Case is the schedule that broke the invariant on the real store
	// (the scenario file is written from it), if one did.
	Case *catalogue.Case
}

func (r realReplay) String() string {
	switch {
	case r.Reproduced > 0 && !r.Original && r.Moved == "":
		return fmt.Sprintf("Found on the simulated durable store (--sim-store) and replayed on the real store (SQLite, in-process): breaks %s there in %d of %d runs.", r.Invariant, r.Reproduced, r.Reruns)
	case r.Reproduced > 0 && r.Moved != "":
		return fmt.Sprintf("Found on the simulated durable store (--sim-store) and replayed on the real store (SQLite, in-process) with %s (the stores count their calls differently): breaks %s there in %d of %d runs.", r.Moved, r.Invariant, r.Reproduced, r.Reruns)
	case r.Reproduced > 0:
		return fmt.Sprintf("Found on the simulated durable store (--sim-store): the shrunk schedule never broke %s on the real store (SQLite, in-process) in %d runs, the original schedule did in %d of %d.", r.Invariant, r.Reruns, r.Reproduced, r.Reruns)
	}
	return fmt.Sprintf("A finding of the simulated durable store (--sim-store) only: neither the shrunk nor the original schedule (nor the shrunk one with its store-call stalls moved by up to %d calls) broke %s on the real store (SQLite, in-process) in %d runs each; it may be an artefact of the model.", maxStallShift, r.Invariant, r.Reruns)
}

// maxStallShift is how far a stall before the k-th store call is moved
// when a finding of the simulated store is replayed on the real one.
const maxStallShift = 3

// replayOnRealStore runs a finding of the simulated store on the real one
// (cfg: the in-process SQLite runner explore would have used): the shrunk
// schedule realReplays times; when it never breaks the invariant there,
// the shrunk schedule with each stall before the k-th store call moved to
// k±1..k±maxStallShift (the simulated store is one call per method, a real
// store may count its calls otherwise: the same stall has another k), the
// first that breaks it once counted over realReplays runs; and last the
// original schedule as many times.
func replayOnRealStore(cmd *cobra.Command, cfg sim.Config, f *explore.Finding) (realReplay, error) {
	dir, err := os.MkdirTemp(cfg.WorkDir, "real-store-")
	if err != nil {
		return realReplay{}, err
	}
	defer os.RemoveAll(dir)
	cfg.WorkDir = dir
	runner, err := sim.NewRunner(cfg)
	if err != nil {
		return realReplay{}, fmt.Errorf("replaying the finding on the real store: %w", err)
	}
	defer runner.CloseShared()
	rr := realReplay{Invariant: f.Invariant, Reruns: realReplays}
	breaks := func(c catalogue.Case) bool {
		return slices.Contains(runner.RunCase(cmd.Context(), c).Broken(), f.Invariant)
	}
	count := func(c catalogue.Case) int {
		n := 0
		for i := 0; i < realReplays; i++ {
			if breaks(c) {
				n++
			}
		}
		if n > 0 {
			rr.Case = &c
		}
		return n
	}
	if rr.Reproduced = count(f.Shrunk); rr.Reproduced > 0 {
		return rr, nil
	}
	for _, m := range movedStalls(f.Shrunk) {
		if breaks(m.c) {
			if rr.Reproduced = count(m.c); rr.Reproduced > 0 {
				rr.Moved = m.what
				return rr, nil
			}
		}
	}
	if rr.Reproduced = count(f.Original); rr.Reproduced > 0 {
		rr.Original = true
	}
	return rr, nil
}

type movedStall struct {
	c    catalogue.Case
	what string
}

// movedStalls are c with one stall before the k-th store call moved to
// k-1, k+1, k-2, … (k-maxStallShift..k+maxStallShift, k >= 1).
func movedStalls(c catalogue.Case) []movedStall {
	var out []movedStall
	for d := 1; d <= maxStallShift; d++ {
		for _, delta := range []int{-d, d} {
			for i, st := range c.Steps {
				a, ok := st.Arms[faults.StoreCall]
				if !ok || a.Hit+delta < 1 {
					continue
				}
				m := c
				m.Steps = slices.Clone(c.Steps)
				m.Steps[i].Arms = maps.Clone(st.Arms)
				a2 := a
				a2.Hit += delta
				m.Steps[i].Arms[faults.StoreCall] = a2
				out = append(out, movedStall{m, fmt.Sprintf("worker %s's stall moved from store call %d to %d", st.Worker, a.Hit, a2.Hit)})
			}
		}
	}
	return out
}

// serverHoldKinds are, for each server, the faults holding a request past
// the lease (faults.ServerOptInKinds) its supervisor can carry out.
func serverHoldKinds(sup interface {
	Can(faults.Kind, string) bool
}, servers []string) map[string][]faults.Kind {
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
