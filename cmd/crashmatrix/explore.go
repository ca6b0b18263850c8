package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/explorerun"
	"github.com/crashmatrix/crashmatrix/internal/tune"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// exploreFlags are explore's flags.
type exploreFlags struct {
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
}

func exploreCmd() *cobra.Command {
	var f exploreFlags
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
		RunE: func(cmd *cobra.Command, _ []string) error { return runExplore(cmd, &f) },
	}
	f.register(cmd.Flags())
	cmd.PreRunE = checkFlags
	return cmd
}

func (f *exploreFlags) register(fl *pflag.FlagSet) {
	fl.Int64Var(&f.seed, "seed", 1, "the seed that decides the run")
	fl.DurationVar(&f.budget, "budget", time.Minute, "how long to search")
	fl.IntVar(&f.max, "max", 0, "stop after this many schedules (0: budget only)")
	fl.StringVar(&f.shard, "shard", "", "i/n: run schedules i, i+n, i+2n, … of the seed")
	fl.StringVar(&f.backendName, "backend", "sqlite", "backend")
	f.store.register(fl, false)
	fl.BoolVar(&f.processes, "processes", false, "kill real worker processes instead of the in-process mode")
	fl.Float64Var(&f.tornWrite, "torn-write", 0, "share (0..1) of those power losses that tear: of each file, some 4 KiB pages written and not fsynced survive and the rest are lost")
	fl.IntVar(&f.tear, "tear", faults.TearPage, "what a torn write keeps or loses whole: 4096 (pages), 512 (disk sectors: a page can survive in part) or a smaller power of two down to 1 (a tear inside one sector)")
	fl.Float64Var(&f.serverHolds, "server-holds", 0, "share (0..1) of server faults that hold the worker's request past its lease instead (server-pause, partition or clock-jump, where the server can take it: server-pause and clock-jump on containers crashmatrix started; at most one per schedule); needs a server backend with server faults")
	fl.Float64Var(&f.diskErrors, "disk-errors", 0, "share (0..1) of armed crashes that become disk errors instead (fsync-error, disk-full or slow-sync, one drawn; at most one per client); needs --processes, an embedded backend or --store-cmd, and FUSE")
	fl.Float64Var(&f.powerLoss, "power-loss", 0, "share (0..1) of armed crashes that cut the power instead (every process of the schedule dies and what was not fsynced is lost); needs --processes, an embedded backend and FUSE")
	fl.Float64Var(&f.randomKills, "random-kills", 0, "share (0..1) of client workers SIGKILLed at a random instant of their run (before a store call or inside a commit, drawn over the probe's counts) besides failpoints; needs --processes")
	fl.BoolVar(&f.simStore, "sim-store", false, "explore on a SIMULATED durable store (memory stores: commits survive a simulated crash, nothing else does), several times faster; protocol bugs only, never a certification; a finding is replayed on SQLite and labelled with how often it broke there")
	fl.BoolVar(&f.files, "in-process-files", false, "keep the embedded database in a file in the in-process mode too (by default it lives in memory there)")
	fl.IntVar(&f.parallel, "parallel", 0, "schedules at once (default 4 per core)")
	fl.IntVar(&f.confirm, "confirm", 3, "re-runs a shrink candidate must fail in")
	fl.StringVar(&f.target, "invariant", "", "hunt for this invariant only ("+check.All[0].Short()+".."+check.All[len(check.All)-1].Short()+")")
	fl.StringSliceVar(&f.bugs, "bug", nil, "run the reference as a mutant: "+bugNames())
	fl.StringVar(&f.mutant, "mutant", "", "backend mutant: "+sim.MutantCreateNotMerge+", "+sim.MutantNoUniqueConstraint+", "+sim.MutantLostCommitIsFailure+" (PostgreSQL: a lost COMMIT reply reported as a definite failure), "+sim.MutantRenewIgnoresHolder+" (SQL stores: a lease renewal that ignores the holder and its token)")
	fl.StringVar(&f.outDir, "out", "crashmatrix-findings", "where the shrunk scenario is written")
	fl.StringVar(&f.workdir, "workdir", "", "scratch directory, one run at a time (a second run on the folder exits 2) (default: a temporary one, under TMPDIR when set, else on /dev/shm when it has 1 GiB free)")
	fl.StringVar(&f.from, "from", "", "start every schedule from the initial block of this scenario file (crashmatrix snapshot writes one); a scenario whose steps arm faults (a random kill's finding) is shrunk instead, under its bugs, mutant, seed and lease TTL")
	f.server.register(fl)
}

// runExplore sets up the backend explore's flags name and runs
// explorerun.Explore on it.
func runExplore(cmd *cobra.Command, f *exploreFlags) error {
	release, err := lockWorkdir(cmd, f.workdir)
	if err != nil {
		return err
	}
	defer release()
	o, err := f.options(cmd)
	if err != nil {
		return err
	}
	// A store in any language (--store-cmd) runs as a child of each
	// worker process: only --processes can kill it with its worker.
	spec, err := f.store.spec(!f.processes)
	if err != nil {
		return err
	}
	// PostgreSQL's clock made movable (libfaketime) only when the
	// schedules may jump it.
	f.server.clockJump = f.serverHolds > 0
	backend, self, cleanup, err := f.server.setUp(cmd, f.backendName)
	if err != nil {
		return err
	}
	defer cleanup()
	if spec.Name == "" {
		spec.Name = backend
	} else {
		backend = spec.Name
	}
	workdir := f.workdir
	if workdir == "" {
		if workdir, err = os.MkdirTemp(sim.CaseRoot(), "crashmatrix-explore-"); err != nil {
			return err
		}
		defer os.RemoveAll(workdir)
	}
	cfg := &o.Config
	cfg.Backend, cfg.Launcher, cfg.WorkDir = spec, sim.BinaryLauncher{Path: self}, workdir
	cfg.InProcess, cfg.InProcessFiles, cfg.Seed, cfg.Mutant = !f.processes, f.files, f.seed, f.mutant
	f.store.useRecovery(cfg)
	if f.processes {
		f.server.useFaults(cfg)
	}
	if f.serverHolds > 0 && (f.server.faults == nil || cfg.ServerFaults == nil) {
		fmt.Fprintln(cmd.ErrOrStderr(), "crashmatrix: --server-holds: this run faults no server (it needs a server backend, --processes, and its servers' fault proxies)")
		return exitError{2}
	}
	o.Backend, o.Replay = backend, f.replay
	if f.server.faults != nil { // a nil *Supervisor in the interface would not be nil
		o.Servers = f.server.faults
	}
	defer tune.GC(!f.processes)()
	code, err := explorerun.Explore(cmd.Context(), o)
	if err == nil && code != 0 {
		return exitError{code}
	}
	return err
}

// options are explore's flags parsed and checked; the run's backend is
// set up after.
func (f *exploreFlags) options(cmd *cobra.Command) (explorerun.ExploreOptions, error) {
	o := explorerun.ExploreOptions{Processes: f.processes, From: f.from, Seed: f.seed, ShardCount: 1,
		Budget: f.budget, Max: f.max, Parallel: f.parallel, Confirm: f.confirm, RandomKills: f.randomKills, PowerLoss: f.powerLoss,
		TornWrite: f.tornWrite, DiskErrors: f.diskErrors, ServerHolds: f.serverHolds, Tear: f.tear, OutDir: f.outDir, Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
	if f.simStore {
		b := embedded.SimStore()
		o.SimStore = &b
	}
	o.Progress = func() *sim.ProgressLog { return progressLog(o.Out, "explore", "schedules", f.max, f.budget) }
	if f.shard != "" {
		s, err := catalogue.ParseShard(f.shard)
		if err != nil {
			return o, err
		}
		o.ShardIndex, o.ShardCount = s.Index, s.Count
	}
	if f.target != "" {
		inv, err := check.ParseInvariant(f.target)
		if err != nil {
			return o, fmt.Errorf("--invariant: %w", err)
		}
		o.Target = inv.Short()
	}
	if err := f.check(cmd); err != nil {
		return o, err
	}
	bs, err := parseBugs(f.bugs)
	if err != nil {
		return o, err
	}
	o.Config.Bugs = bs
	o.Schedule, err = scheduleFrom(cmd, f.from, f.processes)
	return o, err
}

// check refuses flags that do not go together.
func (f *exploreFlags) check(cmd *cobra.Command) error {
	if err := faults.CheckTear(f.tear); err != nil {
		return fmt.Errorf("--tear: %w", err)
	}
	switch {
	case f.tornWrite > 0 && f.powerLoss == 0:
		return fmt.Errorf("--torn-write %v is a share of the power losses: give --power-loss too", f.tornWrite)
	case f.tear != faults.TearPage && f.tornWrite == 0:
		return fmt.Errorf("--tear %d applies to torn writes: give --torn-write too", f.tear)
	}
	if f.randomKills > 0 && !f.processes {
		return fmt.Errorf("--random-kills needs --processes: a goroutine cannot be stopped at an instant")
	}
	if !f.simStore {
		return nil
	}
	switch {
	case f.processes:
		return fmt.Errorf("--sim-store runs in process: the simulated store lives in the explorer's memory (drop --processes)")
	case f.files:
		return fmt.Errorf("--sim-store keeps no database: drop --in-process-files")
	case cmd.Flags().Changed("backend") && f.backendName != "sqlite":
		return fmt.Errorf("--sim-store replays its findings on SQLite: drop --backend %s", f.backendName)
	case f.powerLoss > 0 || f.diskErrors > 0:
		return fmt.Errorf("--power-loss and --disk-errors need a real store on a real file system: drop --sim-store")
	case f.mutant != "" && f.mutant != sim.MutantCreateNotMerge:
		return fmt.Errorf("--mutant %s: the simulated store models %s only (drop --sim-store to explore it)", f.mutant, sim.MutantCreateNotMerge)
	}
	return nil
}

// replay is the command that replays the scenario file at path.
func (f *exploreFlags) replay(path string) string {
	replay := []string{selfCommand(), "run", shellQuote(path), "--repeat", "10"}
	if args := f.store.replayArgs(); args != nil {
		replay = append(replay, args...)
	} else if f.backendName != "sqlite" {
		replay = append(replay, "--backend", shellQuote(f.backendName))
	}
	if !f.processes {
		replay = append(replay, "--in-process")
	}
	return strings.Join(replay, " ")
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
