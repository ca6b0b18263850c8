package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/explorerun"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
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
		Long: `certify runs, for every crash window in the failpoint catalogue and every fault
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
matrix; where power loss runs on the store's own files): at every window
the worker goes on on a failing disk: the next fsync returns EIO and drops
what it had to write, as Linux does, or writes and syncs fail with ENOSPC
until the worker ends, or the next fsync outlasts the lease; after the
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
outran it is undecided too, never a failure).`,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCertify(cmd, f) },
	}
	fl := cmd.Flags()
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
	cmd.PreRunE = checkFlags
	return cmd
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

func runCertify(cmd *cobra.Command, f certifyFlags) error {
	out := cmd.OutOrStdout()
	release, err := lockWorkdir(cmd, f.workdir)
	if err != nil {
		return err
	}
	defer release()
	var points []faults.Point
	for _, p := range f.points {
		pp, err := faults.ParsePoint(p)
		if err != nil && faults.IsStorePoint(faults.Point(p)) {
			// A store-declared window: the probe decides whether it exists.
			pp, err = faults.Point(p), faults.ValidateStorePoint(faults.Point(p))
		}
		if err != nil {
			return fmt.Errorf("--point: %w", err)
		}
		points = append(points, pp)
	}
	var kinds []faults.Kind
	for _, k := range f.kinds {
		kk, err := faults.ParseKind(k)
		if err != nil {
			return fmt.Errorf("--kind: %w", err)
		}
		kinds = append(kinds, kk)
	}
	if err := faults.CheckTear(f.tear); err != nil {
		return fmt.Errorf("--tear: %w", err)
	}
	if cmd.Flags().Changed("tear") && len(kinds) > 0 && !slices.Contains(kinds, faults.TornWrite) {
		return fmt.Errorf("--tear %d applies to the torn-write column, which --kind %s leaves out: add torn-write to --kind", f.tear, strings.Join(f.kinds, ","))
	}
	service, err := f.service.spec(f.inProcess)
	if err != nil {
		return err
	}
	bugs, err := parseBugs(f.bugs)
	if service != nil {
		bugs, err = serviceBugs(f.bugs)
	}
	if err != nil {
		return err
	}
	var shard *catalogue.Shard
	if f.shard != "" {
		s, err := catalogue.ParseShard(f.shard)
		if err != nil {
			return err
		}
		shard = &s
	}
	if f.randomKills > 0 && f.inProcess {
		return fmt.Errorf("--random-kills needs real worker processes: a goroutine cannot be stopped at an instant (drop --in-process)")
	}
	spec, err := f.store.spec(f.inProcess)
	if err != nil {
		return err
	}
	// Lazy mounts for the containers' data only when power loss may run.
	f.server.noPowerLoss = f.inProcess || len(kinds) > 0 && !slices.ContainsFunc(kinds, faults.Kind.IsPowerLoss)
	// PostgreSQL's clock made movable (libfaketime) only when asked for.
	f.server.clockJump = slices.Contains(kinds, faults.ClockJump)
	backend, self, cleanup, err := f.server.setUp(cmd, f.backend)
	if err != nil {
		return err
	}
	if spec.Name == "" {
		spec.Name = backend
	} else {
		backend = spec.Name
	}
	// What a rerun and a written scenario name: the containers, which
	// start their own servers, not the backend they serve (postgres, which
	// needs a DSN and has no server of crashmatrix's to kill).
	replayName := backend
	if f.backend == "containers" {
		replayName = f.backend
	}
	defer cleanup()
	if err := f.store.checkConformance(cmd, f.details); err != nil {
		return err
	}
	// Without --lease-ttl the timings adapt: the default is a floor, raised
	// to what a calibration before the matrix and the cases themselves
	// measure on this machine now.
	adaptive := f.leaseTTL <= 0
	rerun, replay := certifyReplay(f, replayName)
	// What merge prefixes to a case's window and kind to replay it.
	whole := f
	whole.points, whole.kinds, whole.only = nil, nil, nil
	base, _ := certifyReplay(whole, replayName)
	ropt := report.Options{Replay: replay, Rerun: rerun, Details: f.details, Command: "certify"}
	f.leaseTTL = defaultLeaseTTL(f.leaseTTL, backend)
	workdir, tmp, kept := f.workdir, false, false
	if workdir == "" {
		root := sim.CaseRoot()
		if workdir, err = os.MkdirTemp(root, "crashmatrix-"); err != nil {
			return err
		}
		tmp = true
		// Every way out but the one that names the folder (below)
		// removes it: an error leaves no empty folder behind.
		defer func() {
			if !kept {
				_ = os.RemoveAll(workdir)
			}
		}()
	}
	cfg := sim.Config{Backend: spec, Launcher: sim.BinaryLauncher{Path: self},
		WorkDir: workdir, LeaseTTL: f.leaseTTL, Bugs: bugs, Mutant: f.mutant, Seed: f.seed, InProcess: f.inProcess, InProcessFiles: f.inProcessFiles,
		Adaptive: adaptive, WallClock: f.wallClock, FailFast: f.failFast, Service: service}
	f.server.useFaults(&cfg)
	f.store.useRecovery(&cfg)
	runner, err := sim.NewRunner(cfg)
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "crashmatrix:", err)
		return exitError{2}
	}
	// A fault-free probe run discovers the windows the store declares and
	// measures the worker random kills are drawn over. A probe that fails
	// (the store breaks without any fault) fails the report, beside the
	// matrix.
	sel := catalogue.Selection{Points: points, Kinds: kinds, Classes: f.only, RandomKills: f.randomKills, Tear: f.tear}
	if why := sel.RandomKillsLeftOut(); why != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "crashmatrix: --random-kills:", why)
		return exitError{2}
	}
	probe, perr := runner.Probe(cmd.Context())
	untested, err := runner.PowerLossSelection(&sel)
	if err == nil && cmd.Flags().Changed("tear") && !sel.TornWrite {
		err = fmt.Errorf("--tear %d applies to the torn-write column, which this run does not have (it comes with the power-loss column on an embedded backend, or with --kind torn-write where power loss runs)", f.tear)
	}
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "crashmatrix:", err)
		return exitError{2}
	}
	cases := sel.Cases(probe.Probe, catalogue.Lease(f.leaseTTL), f.seed)
	for _, p := range points {
		if faults.IsStorePoint(p) && !slices.ContainsFunc(probe.Windows, func(w catalogue.StoreWindow) bool { return w.Point == p }) {
			if perr != nil {
				// The probe is how store windows are found: one that did
				// not finish says nothing of whether the store declares it.
				fmt.Fprintf(cmd.ErrOrStderr(), "crashmatrix: --point %s: store windows are unknown, the fault-free probe run did not finish: %v\n", p, perr)
				return exitError{2}
			}
			found := make([]string, len(probe.Windows))
			for i, w := range probe.Windows {
				found[i] = string(w.Point)
			}
			return fmt.Errorf("--point %s: the probe run never reached this store window (found: %v); is faults.At called with the context the store method was given?", p, found)
		}
	}
	if f.server.faults != nil {
		// Every window x server fault x server this run can fault, as
		// filtered (a server given by DSN/URI without kill and start
		// commands loses replies and connections, and is not crashed).
		for _, c := range catalogue.Filter(catalogue.Lease(f.leaseTTL).ServerMatrix(), points, kinds, f.only) {
			if f.server.faults.Can(c.Kind, c.Server) {
				cases = append(cases, c)
			}
		}
	}
	optIn, err := optInServerCases(cmd.ErrOrStderr(), f.server.faults, f.leaseTTL, points, kinds, f.only)
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "crashmatrix:", err)
		return exitError{2}
	}
	cases = append(cases, optIn...)
	cases, leftOut := runner.ServiceCases(cases)
	if len(cases) == 0 {
		return fmt.Errorf("no case matches --point %v --kind %v --class %v %v", f.points, f.kinds, f.only, leftOut)
	}
	matrix := matrixID(f, backend, cases)
	if shard != nil {
		if cases = shard.Select(cases); len(cases) == 0 {
			return fmt.Errorf("--shard %s: the matrix has only %d cases, so shard %d has none; use at most %d shards", shard, len(matrix.Cases), shard.Index, len(matrix.Cases))
		}
		ropt.Rerun += " --shard " + shard.String()
	}
	var progress func(verdict.CaseResult)
	var bar *mpb.Bar
	var pb *mpb.Progress
	var plog *sim.ProgressLog
	if !f.quiet {
		plog = progressLog(out, "certify", "cases", len(cases), 0)
	}
	if plog != nil {
		progress = plog.Case
	} else if !f.quiet && isatty.IsTerminal(os.Stderr.Fd()) {
		pb = mpb.New(mpb.WithOutput(os.Stderr), mpb.WithWidth(40))
		bar = pb.AddBar(int64(len(cases)), mpb.PrependDecorators(decor.Name("certify "+f.backend+" "), decor.CountersNoUnit("%d/%d")),
			mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO)))
		progress = func(verdict.CaseResult) { bar.Increment() }
	}
	restoreGC := tuneGC(true)
	restoreProcs := func() {}
	if !runner.Config().InProcess {
		restoreProcs = tuneProcs(f.parallel)
	}
	rep := runner.RunAll(cmd.Context(), cases, f.parallel, progress)
	if plog != nil {
		plog.Stop()
	}
	restoreProcs()
	restoreGC()
	rep.WithProbe(probe, perr, sel)
	rep.LeftOut = leftOut
	rep.Matrix = &matrix
	if shard != nil {
		rep.Shard = &catalogue.ShardRun{Shard: *shard, Cases: len(cases), Rerun: rerun, Replay: base}
	}
	interrupted := cmd.Context().Err() != nil
	// A run that failed keeps its case data for the histories, even when
	// writing a report fails below; --workdir and --keep keep it always.
	kept = !tmp || f.keep || (rep.ExitCode != 0 && !interrupted)
	rep.PowerLoss = untested
	runner.CloseShared()
	if pb != nil {
		pb.Wait()
	}
	if err := certifyExplore(cmd, f, spec, self, bugs, workdir, probe.Probe, shard, &rep, &ropt); err != nil {
		return err
	}
	interrupted = cmd.Context().Err() != nil
	kept = kept || (rep.ExitCode != 0 && !interrupted)
	if err := report.SaveTimelines(workdir, &rep); err != nil {
		return err
	}
	report.WriteTerminal(out, rep, ropt)
	fmt.Fprintln(out, rep.Timing)
	if rep.StoreStarts != "" {
		fmt.Fprintln(out, rep.StoreStarts)
	}
	if err := writeReports(out, rep, ropt, f.jsonOut, f.junitOut, f.html); err != nil {
		return err
	}
	runArgs := append(f.store.replayArgs(), f.service.replayArgs()...)
	if replayName == "containers" {
		// run starts the containers only when told to.
		runArgs = append([]string{"--backend", replayName}, runArgs...)
	}
	if err := writeKillReplays(out, workdir, replayName, f.leaseTTL, rep, runArgs...); err != nil {
		return err
	}
	switch {
	case kept:
		fmt.Fprintf(out, "case data and histories: %s\n", workdir)
	case interrupted:
		// An interrupted run leaves nothing behind: its workers are
		// killed (RunAll), its containers stopped (cleanup), and its
		// temporary case data removed (deferred above); --workdir or
		// --keep keep it.
		fmt.Fprintln(cmd.ErrOrStderr(), "crashmatrix: interrupted; every worker killed, temporary case data removed")
	}
	if rep.ExitCode != 0 {
		return exitError{rep.ExitCode}
	}
	return nil
}

// writeReports writes the JSON, JUnit and HTML reports the flags asked
// for ("" skips one) and names each file written.
func writeReports(out io.Writer, rep verdict.Report, o report.Options, jsonPath, junitPath, htmlPath string) error {
	for _, w := range []struct {
		path  string
		write func(io.Writer, verdict.Report, report.Options) error
	}{{jsonPath, report.WriteJSON}, {junitPath, report.WriteJUnit}, {htmlPath, report.WriteHTML}} {
		if w.path == "" {
			continue
		}
		if err := writeFile(w.path, func(wr io.Writer) error { return w.write(wr, rep, o) }); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", w.path)
	}
	return nil
}

func writeFile(path string, fn func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// defaultLeaseTTL picks the workers' lease TTL: short on the embedded
// default, longer on servers, whose first writes in a fresh process (a new
// driver, a new pool) can take a good part of a second; a live worker that
// loses its lease to a slow write is refused and the fault case is not
// exercised.
func defaultLeaseTTL(flag time.Duration, backend string) time.Duration {
	switch {
	case flag > 0:
		return flag
	case backend == "sqlite" || backend == "memory":
		return 250 * time.Millisecond
	default:
		return 600 * time.Millisecond
	}
}

// writeKillReplays writes each random kill and durable-step kill that
// broke an invariant as a scenario (the same crash at the same store call or commit, or for a
// wall-clock kill the same offset, expecting the same invariants to break,
// with the run's bugs and mutant) and prints the command that replays it.
func writeKillReplays(out io.Writer, workdir, backend string, leaseTTL time.Duration, rep verdict.Report, runArgs ...string) error {
	for _, r := range rep.Results {
		if r.Case.Class != catalogue.RandomKillClass && !catalogue.IsDurableStep(r.Case) || r.Verdict != verdict.Fail {
			continue
		}
		sc, err := scenarios.FromFailure(r, rep, backend, leaseTTL)
		if err != nil {
			return err
		}
		b, err := sc.Marshal()
		if err != nil {
			return err
		}
		path := filepath.Join(workdir, sc.Name+".yaml")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
		how := "replay with"
		if _, _, _, ok := catalogue.AnchoredKill(r.Case); !ok && !catalogue.IsDurableStep(r.Case) {
			how = "a wall-clock kill, it lands where the machine's timing puts it; try"
		}
		fmt.Fprintf(out, "%s broke %s: %s: crashmatrix run %s --repeat 10%s\n", r.Case.ID, strings.Join(r.Broken(), ","), how, path, strings.TrimRight(" "+strings.Join(runArgs, " "), " "))
	}
	return nil
}
