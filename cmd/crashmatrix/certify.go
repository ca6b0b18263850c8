package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/certifyrun"
	"github.com/crashmatrix/crashmatrix/internal/cmdkit"
	"github.com/crashmatrix/crashmatrix/internal/explorerun"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type certifyFlags struct {
	backend, mutant, workdir  string
	jsonOut, junitOut, html   string
	bugs, points, kinds, only []string
	parallel, randomKills     int
	explore                   int
	exploreSeed               int64
	tear                      int
	seed                      int64
	leaseTTL                  time.Duration
	keep, quiet, inProcess    bool
	wallClock, failFast       bool
	details                   bool
	inProcessFiles            bool
	server                    serverFlags
	shard                     string
	store                     storeCmdFlags
	service                   serviceCmdFlags
}

func certifyCmd() *cobra.Command {
	var f certifyFlags
	cmd := &cobra.Command{
		Use:   "certify",
		Short: "Run the crash matrix: every window x fault kind, with real process kills",
		Long:  certifyLong,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runCertify(cmd, f) },
	}
	f.register(cmd.Flags())
	cmd.PreRunE = checkFlags
	return cmd
}

// register adds certify's flags.
func (f *certifyFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.backend, "backend", "sqlite", "store backend: sqlite (embedded default), memory, postgres (with --postgres-dsn, optionally --neo4j-uri), containers (starts PostgreSQL and Neo4j with testcontainers-go)")
	fl.StringVar(&f.mutant, "mutant", "", "backend mutant: "+sim.MutantCreateNotMerge+", "+sim.MutantNoUniqueConstraint+", "+sim.MutantLostCommitIsFailure+" (PostgreSQL: a lost COMMIT reply reported as a definite failure), "+sim.MutantRenewIgnoresHolder+" (SQL stores: a lease renewal that ignores the holder and its token), "+sim.MutantServerClockLease+" (PostgreSQL: leases on the server's own clock, caught by --kind clock-jump), "+sim.MutantTwoTransactionCreate+" (PostgreSQL: an operation's row and its plan in two transactions, caught by the servers' durable-step sweep of --backend containers), "+sim.MutantSynchronousOff+" (embedded SQLite without fsync: caught by power loss only)")
	fl.StringSliceVar(&f.bugs, "bug", nil, "service mutant(s): "+bugNames())
	fl.StringSliceVar(&f.points, "point", nil, "only these windows (failpoint names)")
	fl.StringSliceVar(&f.kinds, "kind", nil, "only these fault kinds")
	fl.IntVar(&f.tear, "tear", faults.TearSector, "what the torn-write column keeps or loses whole of the writes not synced: 512 (disk sectors: a page can survive in part; its cases' IDs end in -512), 4096 (4 KiB pages, as the page cache writes them back) or a smaller power of two down to 1 (a tear inside one sector; IDs end in -N)")
	fl.StringSliceVar(&f.only, "class", nil, "only these case classes")
	fl.StringVar(&f.workdir, "workdir", "", "where case data and histories go, one run at a time (a second run on the folder exits 2) (default: a temporary folder, removed on success, under TMPDIR when set, else on /dev/shm (tmpfs) when it has 1 GiB free: a SIGKILL keeps the page cache, and a busy disk's fsync could outlast a worker's deadline)")
	fl.StringVar(&f.jsonOut, "json", "", "write the JSON report here")
	fl.StringVar(&f.junitOut, "junit", "", "write JUnit XML here")
	fl.StringVar(&f.html, "html", "", "write the self-contained HTML report here")
	fl.IntVar(&f.parallel, "parallel", 12, "cases run at once")
	fl.IntVar(&f.randomKills, "random-kills", 0, "also run N random kills: the standard script's worker SIGKILLed at a seeded instant of its run, before a store call or inside a commit of the embedded database (replayable), or where no commit is seen every other one at a wall-clock offset (real processes only)")
	fl.Int64Var(&f.seed, "seed", 1, "seed for retry jitter")
	fl.IntVar(&f.explore, "explore", explorerun.DefaultCount, "after a matrix that certified, explore this many seeded fault schedules (in-process where the backend allows; a schedule that breaks an invariant is shrunk, written as a scenario and fails the run); 0: off; none with --point, --kind or --class unless given; with --store-cmd the default is "+strconv.Itoa(explorerun.DefaultProcessCount)+" (each schedule starts store processes)")
	fl.Int64Var(&f.exploreSeed, "explore-seed", 0, "the seed of --explore's schedules (default: --seed)")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 0, "the document lease TTL in workers (a killed worker blocks its document this long): 250ms on the embedded sqlite and memory backends, 600ms on servers and --store-cmd stores by default; with --wall-clock and no value it adapts to what a calibration of step latency, and the cases themselves, measure")
	fl.BoolVar(&f.wallClock, "wall-clock", false, "run worker leases, claims and backoff on the wall clock; by default a case's workers share a harness clock that moves only when one sleeps or stalls, so the verdict does not depend on the machine's load (use it when a lock provider compares expiry with a clock of its own)")
	fl.BoolVar(&f.keep, "keep", false, "keep the workdir even when certified")
	fl.BoolVar(&f.failFast, "fail-fast", false, "start no more cases once one has failed (the cases under way finish; the rest are undecided, not run): for a run that only asks whether anything breaks")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress (a bar on a terminal; outside one, such as a CI log, a line at each tenth of the run and at least every 10s)")
	fl.BoolVarP(&f.details, "details", "v", false, "list every failing case with every violation, its evidence, history and replay command (the default is a digest by cause)")
	f.server.register(fl)
	f.store.register(fl, true)
	f.service.register(fl)
	fl.BoolVar(&f.inProcess, "in-process", false, "simulate crashes in-process (workers are goroutines, time is simulated) instead of killing processes")
	fl.StringVar(&f.shard, "shard", "", "i/n: run only shard i of n of the matrix (0 <= i < n); merge the shards' JSON reports with crashmatrix merge")
	fl.BoolVar(&f.inProcessFiles, "in-process-files", false, "keep the embedded database in a file in the in-process mode too (by default it lives in memory there)")
}

func bugNames() string {
	var s []string
	for _, b := range reference.Bugs {
		s = append(s, string(b))
	}
	return strings.Join(s, ", ")
}

// parseBugs checks --bug values against the service mutants.
func parseBugs(names []string) ([]reference.Bug, error) {
	var bugs []reference.Bug
	for _, b := range names {
		if !slices.Contains(reference.Bugs, reference.Bug(b)) {
			return nil, fmt.Errorf("--bug %q: unknown (known: %s)", b, bugNames())
		}
		bugs = append(bugs, reference.Bug(b))
	}
	return bugs, nil
}

// certifyLong is certify's help.
const certifyLong = `certify runs, for every crash window in the failpoint catalogue and every fault
kind that applies there, a fresh case: worker processes run the reference service
over the backend; one is killed (SIGKILL) exactly at the window; new workers recover;
then, with faults off, the invariants I1-I9 are checked against the stores' contents
and the recorded history.

With --backend containers the database servers are faulted too (unless
--server-faults=false): killed and restarted on their data (server-crash), a
committed write's reply dropped (ack-lost), a connection cut before its request
(conn-reset), at every window. Servers you run (--postgres-dsn, --neo4j-uri)
are faulted only with --server-faults: replies lost and connections cut through
the fault proxy, and server-crash with --postgres-kill/--postgres-start
(--neo4j-kill/--neo4j-start), the commands that kill and start them.

--shard i/n runs only the i-th of n parts of the matrix (0 <= i < n; the
cases dealt out by their ID), so that n machines split it; its report says
which shard it covers, and only "crashmatrix merge" of the n shards' JSON
reports gives the matrix's verdict.

Power loss: where FUSE works (Linux, root), on the embedded sqlite, on a
--store-cmd store (its files, in the folder hello names) and on --backend
containers, every window also gets a power-loss case: the data (the
case's files; the servers' data directories, bind-mounted into their
containers) lives on a lazy file system (faults/lazyfs) that keeps what was
not fsynced in memory; at the window every process of the case dies (and
every server), everything not synced is thrown away, the servers start
again on what is left, then recovery runs and I1-I9 are judged (I9 right
after the power loss too). Elsewhere (servers given by DSN/URI, the
in-process mode) the verdict says "power loss: not tested (why)";
--kind power-loss there exits 2.

Torn writes (the torn-write column, beside the power-loss column wherever
that runs on an embedded backend: the embedded sqlite, a --store-cmd
store; on servers only with --kind torn-write): the same cases, but of
each file that survives, some 512-byte disk sectors written and not
fsynced survive and the rest are lost, as a seed drawn from the window
decides, so a page can survive in part (--tear 4096: whole 4 KiB pages;
--tear 1 down to 256: pieces of a sector, for a disk that does not write a
sector whole). A case whose store had nothing un-synced at the window has
nothing to tear: off servers it is not applicable (the power-loss case at
the window is the same cut), on a server not exercised.

Disk errors (--kind fsync-error, disk-full, slow-sync; not in the default
matrix; where power loss runs on the store's own files, and on
PostgreSQL's data directory with --backend containers):
at every window the worker goes on on a failing disk: the next fsync
returns EIO and drops what it had to write, as Linux does, or writes and
syncs fail with ENOSPC until the worker ends, or the next fsync outlasts
the lease; after the
first two the power is cut once the worker ends, and I9 judges what the
store acknowledged. The durable-step sweep's calls meet them right before
each of their fsyncs too.

Exploration: after a matrix that certified, --explore N schedules of the
explorer (several workers and documents, repeated crashes, crashes during
recovery, pauses past the lease, retractions racing ingestions) run
in-process where the backend allows (a --store-cmd store: real processes),
drawn from --explore-seed (default --seed): a count, not a time budget, so
the verdict does not depend on the machine. The first that breaks an
invariant is shrunk, written as a scenario in the workdir and reported as
a failing case; --explore 0 turns it off and the verdict says so. With
--shard i/n each shard explores every n-th schedule from i.

Exit code: 0 certified (with --shard: the shard's cases passed), 1 an invariant broke (or a fault did not fire), 2 undecided,
or a setup the run cannot vouch for, before any case: a flag empty, out of range or for
another backend; a --workdir another run is using; with --wall-clock, a --lease-ttl
shorter than twice the longest step the calibration measured (a case whose own steps
outran it is undecided too, never a failure).`

// runCertify is certify: the flags parsed into certifyrun.Options, the
// backend set up (containers started), then certifyrun.Run.
func runCertify(cmd *cobra.Command, f certifyFlags) error {
	release, err := lockWorkdir(cmd, f.workdir)
	if err != nil {
		return err
	}
	defer release()
	o, err := f.options(cmd)
	if err != nil {
		return err
	}
	// Lazy mounts for the containers' data only when power loss or a
	// disk error may run; PostgreSQL's clock made movable (libfaketime)
	// only when asked for.
	kinds := o.Selection.Kinds
	onLazy := func(k faults.Kind) bool { return k.IsPowerLoss() || k.IsDisk() }
	f.server.noPowerLoss = f.inProcess || len(kinds) > 0 && !slices.ContainsFunc(kinds, onLazy)
	f.server.clockJump = slices.Contains(kinds, faults.ClockJump)
	spec, backend, self, cleanup, err := setUpBackend(cmd, &f.server, &f.store, f.backend, f.inProcess)
	if err != nil {
		return err
	}
	defer cleanup()
	o.Config.Backend = spec
	f.afterSetUp(cmd, &o, backend, self)
	return exitWith(certifyrun.Run(cmd.Context(), o, cmd.OutOrStdout()))
}

// exitWith ends a command with a lower package's exit code.
func exitWith(code int, err error) error {
	if err != nil {
		return err
	}
	if code != 0 {
		return exitError{code}
	}
	return nil
}

// options parses certify's flags into a run's options, up to what the
// backend's setup decides (afterSetUp).
func (f certifyFlags) options(cmd *cobra.Command) (certifyrun.Options, error) {
	sel, err := f.selection(cmd)
	if err != nil {
		return certifyrun.Options{}, err
	}
	service, err := f.service.spec(f.inProcess)
	if err != nil {
		return certifyrun.Options{}, err
	}
	bugs, err := parseBugs(f.bugs)
	if service != nil {
		bugs, err = serviceBugs(f.bugs)
	}
	if err != nil {
		return certifyrun.Options{}, err
	}
	o := certifyrun.Options{Selection: sel, TearGiven: cmd.Flags().Changed("tear"), LeaseTTL: f.leaseTTL, WorkDir: f.workdir,
		Keep: f.keep, Quiet: f.quiet, Details: f.details, Parallel: f.parallel, JSON: f.jsonOut, JUnit: f.junitOut, HTML: f.html,
		Label: f.backend, Stderr: cmd.ErrOrStderr(), Config: sim.Config{Bugs: bugs, Mutant: f.mutant, Seed: f.seed, InProcess: f.inProcess,
			InProcessFiles: f.inProcessFiles, WallClock: f.wallClock, FailFast: f.failFast, Service: service}}
	if f.shard != "" {
		s, err := catalogue.ParseShard(f.shard)
		if err != nil {
			return certifyrun.Options{}, err
		}
		o.Shard = &s
	}
	if f.randomKills > 0 && f.inProcess {
		return certifyrun.Options{}, fmt.Errorf("--random-kills needs real worker processes: a goroutine cannot be stopped at an instant (drop --in-process)")
	}
	return o, nil
}

// selection parses --point, --kind, --class, --random-kills and --tear.
func (f certifyFlags) selection(cmd *cobra.Command) (catalogue.Selection, error) {
	sel := catalogue.Selection{Classes: f.only, RandomKills: f.randomKills, Tear: f.tear}
	for _, p := range f.points {
		pp, err := faults.ParsePoint(p)
		if err != nil && faults.IsStorePoint(faults.Point(p)) {
			// A store-declared window: the probe decides whether it exists.
			pp, err = faults.Point(p), faults.ValidateStorePoint(faults.Point(p))
		}
		if err != nil {
			return sel, fmt.Errorf("--point: %w", err)
		}
		sel.Points = append(sel.Points, pp)
	}
	for _, k := range f.kinds {
		kk, err := faults.ParseKind(k)
		if err != nil {
			return sel, fmt.Errorf("--kind: %w", err)
		}
		sel.Kinds = append(sel.Kinds, kk)
	}
	if err := faults.CheckTear(f.tear); err != nil {
		return sel, fmt.Errorf("--tear: %w", err)
	}
	if cmd.Flags().Changed("tear") && len(sel.Kinds) > 0 && !slices.Contains(sel.Kinds, faults.TornWrite) {
		return sel, fmt.Errorf("--tear %d applies to the torn-write column, which --kind %s leaves out: add torn-write to --kind", f.tear, strings.Join(f.kinds, ","))
	}
	return sel, nil
}

// afterSetUp completes o with what the backend's setup decided (the
// backend's spec and name, --store-cmd's when given, the worker binary,
// the servers to fault): the runner's configuration, the replay
// commands, the conformance suites and the exploration.
func (f certifyFlags) afterSetUp(cmd *cobra.Command, o *certifyrun.Options, backend, self string) {
	o.Backend, o.Servers = backend, f.server.faults
	o.Config.Launcher = sim.BinaryLauncher{Path: self}
	f.server.useFaults(&o.Config)
	f.store.useRecovery(&o.Config)
	o.Matrix = matrixID(f, backend)
	// What a rerun and a written scenario name: the containers, which
	// start their own servers, not the backend they serve (postgres, which
	// needs a DSN and has no server of crashmatrix's to kill).
	replayName := backend
	if f.backend == "containers" {
		replayName = f.backend
	}
	o.Replay.Rerun, o.Replay.Case = certifyReplay(f, replayName)
	// What merge prefixes to a case's window and kind to replay it.
	whole := f
	whole.points, whole.kinds, whole.only = nil, nil, nil
	o.Replay.Base, _ = certifyReplay(whole, replayName)
	o.Replay.Backend = replayName
	o.Replay.Args = append(f.store.replayArgs(), f.service.replayArgs()...)
	if replayName == "containers" {
		// run starts the containers only when told to.
		o.Replay.Args = append([]string{"--backend", replayName}, o.Replay.Args...)
	}
	o.Conformance = f.store.conformanceOptions()
	o.Explore = certifyExplore(cmd, f, backend)
}

// defaultLeaseTTL is the workers' lease TTL without --lease-ttl (cmdkit).
var defaultLeaseTTL = cmdkit.DefaultLeaseTTL
