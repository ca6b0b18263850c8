// Package crashrun runs the crash matrix from inside a go test: the engine
// behind properties.CertifyCrashSafety, and the project's own tests that
// expect a run to fail (mutants, broken backends). It is internal so that
// the exported properties package stays one screen long.
package crashrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/explorerun"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Options narrow or adjust a run (see properties.CrashOptions, which
// mirrors the fields a store author sets).
type Options struct {
	Points    []faults.Point
	Kinds     []faults.Kind
	Classes   []string
	Tear      int           // the torn-write column's unit (sim.Selection.Tear)
	LeaseTTL  time.Duration // zero: adaptive, from 250ms up (sim.Config.Adaptive)
	WallClock bool          // leases on the wall clock (sim.Config.WallClock)
	Parallel  int
	Bugs      []reference.Bug
	Mutant    string
	ReportDir string
	// RandomKills adds that many random kills (sim.RandomKillCase), seeded by Seed
	// (default 1).
	RandomKills int
	Seed        int64
	// Cases, when set, are run instead of the matrix (after the probe).
	Cases []catalogue.Case
	// StopAtFirstFailure ends the run once a case breaks an invariant
	// (cases not yet run are reported undecided).
	StopAtFirstFailure bool
	// ProcessTimeout, when set, is the workers' deadline (sim.Config's).
	ProcessTimeout time.Duration
	// RecoverWith, when set, is version B of the store: every crash of
	// the matrix is recovered by it (sim.Config.RecoverUse). The
	// exploration, in-process on one build, does not run then.
	RecoverWith *sim.Backend
	// Service, when set, is a service of the caller's run through the
	// service protocol instead of the reference (sim.Config.Service;
	// Bugs are then its broken variants); backend holds the stores it
	// takes from the harness. Its exploration runs with worker processes
	// (a service process cannot die with an in-process worker).
	Service *sim.ServiceSpec
	// Explore, when positive, runs that many seeded exploration schedules
	// (seed Seed) in-process after a matrix that certified
	// (explorerun.Run); a finding fails the run as a case of its own. On
	// the whole matrix, zero says "exploration: off" in the report.
	Explore int
}

// CaseFilterEnv names the environment variable that narrows a run to the
// listed case ids (comma-separated): what a failing case's replay command
// sets.
const CaseFilterEnv = "CRASHMATRIX_CASE"

// Result is a finished run: its report and, when it did not certify, the
// folder that holds its reports and histories.
type Result struct {
	verdict.Report
	// Dir holds report.html, report.json, junit.xml and one folder per
	// case (its history.jsonl); empty when the run certified (its data
	// is then removed).
	Dir string
	// Options are the report options of the run's test (rerun and replay
	// commands).
	Options report.Options
}

// Run runs the crash matrix with worker processes that re-execute the
// test binary (running only t's test). In such a re-executed worker it
// runs the worker and exits the process.
//
// Where the data goes: with o.ReportDir set, the run works in a fresh
// folder under it; otherwise in a fresh temporary folder, where certify
// puts one (sim.CaseRoot: under TMPDIR when set, else on /dev/shm when it
// has room, else the system's temporary folder). A run that
// certifies removes its folder. A run that does not keeps the reports and
// every case's history there, removes the stores' data (the bulk, up to
// tens of MB) unless ReportDir was set, and returns the folder in Dir;
// without ReportDir, the folder goes when t ends without failing (the test
// expected the failure).
func Run(t *testing.T, backend sim.Backend, o Options) Result {
	t.Helper()
	if spec := os.Getenv(sim.WorkerSpecEnv); spec != "" {
		os.Exit(runWorker(spec, backend, o.RecoverWith))
	}
	// Without a fixed TTL the timings adapt to the machine (sim.Config.Adaptive).
	adaptive := o.LeaseTTL <= 0
	if adaptive {
		o.LeaseTTL = 250 * time.Millisecond
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	parent := o.ReportDir
	if parent != "" {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			t.Fatalf("crash matrix: report folder: %v", err)
		}
	} else {
		// As certify's: TMPDIR when set, else /dev/shm when it has room.
		parent = sim.CaseRoot()
	}
	work, err := os.MkdirTemp(parent, "crashmatrix-test-")
	if err != nil {
		t.Fatalf("crash matrix: work folder: %v", err)
	}
	b := backend
	runner, err := sim.NewRunner(sim.Config{Use: &b, Backend: sim.BackendSpec{Name: backend.Name},
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: RunPattern(t.Name())},
		WorkDir:  work, LeaseTTL: o.LeaseTTL, Bugs: o.Bugs, Mutant: o.Mutant, Seed: o.Seed, Adaptive: adaptive, ProcessTimeout: o.ProcessTimeout, WallClock: o.WallClock,
		RecoverUse: o.RecoverWith, Service: o.Service})
	if err != nil {
		os.RemoveAll(work)
		t.Fatalf("crash matrix: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		defer cancel()
	}
	// A fault-free probe run discovers the crash windows the store
	// declares inside its own methods (faults.At).
	started := time.Now()
	probe, perr := runner.Probe(ctx)
	sel := catalogue.Selection{Points: o.Points, Kinds: o.Kinds, Classes: o.Classes, RandomKills: o.RandomKills, Tear: o.Tear}
	if why := sel.RandomKillsLeftOut(); why != "" {
		os.RemoveAll(work)
		t.Fatalf("crash matrix: RandomKills: %s", why)
	}
	if hung, ok := probeHung(probe); perr != nil && ok {
		// A worker of the fault-free probe hung (its stacks say in which
		// store method): every case would hang the same way, each until
		// its deadline, the calibration first. The run ends here,
		// undecided, with the probe's case as its evidence.
		rep := verdict.Report{Backend: backend.Name, Mutant: o.Mutant, Seed: o.Seed, Started: started, Counts: map[verdict.Verdict]int{},
			Timing: runner.Timing(), Results: []verdict.CaseResult{hung}, Probed: true}
		rep.Took = time.Since(started)
		rep.Finish()
		return failedRun(t, work, rep, o)
	}
	// Power loss where the backend keeps a case's data in its folder
	// (Backend.Embedded) and FUSE works; the report says so otherwise.
	untested, err := runner.PowerLossSelection(&sel)
	if err != nil {
		os.RemoveAll(work)
		t.Fatalf("crash matrix: %v", err)
	}
	cases := sel.Cases(probe.Probe, catalogue.Lease(o.LeaseTTL), o.Seed)
	if len(o.Cases) > 0 {
		cases = o.Cases
	}
	if only := os.Getenv(CaseFilterEnv); only != "" {
		ids := strings.Split(only, ",")
		var unknown []string
		for _, id := range ids {
			if !slices.ContainsFunc(cases, func(c catalogue.Case) bool { return c.ID == id }) {
				unknown = append(unknown, id)
			}
		}
		if len(unknown) > 0 {
			os.RemoveAll(work)
			t.Fatalf("crash matrix: %s=%s: no case has the id %s in this run's matrix (points %v kinds %v classes %v); a failing run prints each case's id in its replay command",
				CaseFilterEnv, only, strings.Join(unknown, ", "), o.Points, o.Kinds, o.Classes)
		}
		cases = slices.DeleteFunc(cases, func(c catalogue.Case) bool { return !slices.Contains(ids, c.ID) })
	}
	for _, p := range o.Points {
		if faults.IsStorePoint(p) && !slices.ContainsFunc(probe.Windows, func(w catalogue.StoreWindow) bool { return w.Point == p }) {
			os.RemoveAll(work)
			t.Fatalf("crash matrix: the probe run never reached store window %s (found %+v); is faults.At called with the context the store method was given?", p, probe.Windows)
		}
	}
	if len(cases) == 0 {
		os.RemoveAll(work)
		t.Fatalf("crash matrix: no case matches points %v kinds %v classes %v", o.Points, o.Kinds, o.Classes)
	}
	var progress func(verdict.CaseResult)
	if o.StopAtFirstFailure {
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		progress = func(r verdict.CaseResult) {
			if r.Verdict == verdict.Fail {
				stop()
			}
		}
	}
	// Under go test -v, a line at each tenth of the run and every 10 s
	// (t.Log streams there), so that a CI log shows the run going on.
	var plog *sim.ProgressLog
	if testing.Verbose() {
		plog = sim.NewProgressLog(func(line string) { t.Log(line) }, "crash matrix", "cases", len(cases), 0)
		if stopAt := progress; stopAt != nil {
			progress = func(r verdict.CaseResult) { plog.Case(r); stopAt(r) }
		} else {
			progress = plog.Case
		}
	}
	rep := runner.RunAll(ctx, cases, o.Parallel, progress)
	if plog != nil {
		plog.Stop()
	}
	rep.WithProbe(probe, perr, sel)
	rep.PowerLoss = untested
	if err := explored(ctx, t, backend, o, sel, work, probe.Probe, &rep); err != nil {
		os.RemoveAll(work)
		t.Fatalf("crash matrix: %v", err)
	}
	if rep.ExitCode == 0 {
		if err := os.RemoveAll(work); err != nil {
			t.Logf("crash matrix: removing %s: %v", work, err)
		}
		return Result{Report: rep, Options: ReportOptions(t)}
	}
	return failedRun(t, work, rep, o)
}

// explored runs the exploration after the matrix (Options.Explore), in
// the in-process mode, and puts what it did into rep.
func explored(ctx context.Context, t *testing.T, backend sim.Backend, o Options, sel catalogue.Selection, work string, probe catalogue.Probe, rep *verdict.Report) error {
	switch {
	case o.RecoverWith != nil:
		rep.Exploration = "exploration: not run (an upgrade run: the exploration runs in-process, on one build of the store; certify each build on its own)"
		return nil
	case o.Explore <= 0:
		if sel.Whole() && len(o.Cases) == 0 {
			rep.Exploration = explorerun.Off
		}
		return nil
	case ctx.Err() != nil:
		return nil
	case rep.ExitCode != 0:
		rep.Exploration = "exploration: not run (the matrix did not certify)"
		return nil
	}
	b := backend
	cfg := sim.Config{Use: &b, Backend: sim.BackendSpec{Name: backend.Name}, WorkDir: filepath.Join(work, "explore"),
		InProcess: true, LeaseTTL: o.LeaseTTL, Bugs: o.Bugs, Mutant: o.Mutant, Seed: o.Seed, WallClock: o.WallClock}
	mode, parallel := "in-process", 4*runtime.NumCPU()
	if o.Service != nil {
		// The service's processes die with their workers: real ones.
		cfg.InProcess, cfg.Service, cfg.Launcher = false, o.Service, sim.ReexecLauncher{Binary: os.Args[0], Test: RunPattern(t.Name())}
		mode, parallel = "process kills", max(o.Parallel, 2)
	}
	runner, err := sim.NewRunner(cfg)
	if err != nil {
		return fmt.Errorf("exploration: %w", err)
	}
	defer runner.CloseShared()
	shape := explorerun.Shape(probe)
	shape.LeaseTTLMillis = o.LeaseTTL.Milliseconds()
	rerun := ReportOptions(t).Rerun
	start := time.Now()
	out, err := explorerun.Run(ctx, runner, explorerun.Options{Count: o.Explore, Seed: o.Seed, Parallel: parallel, Shape: shape, Dir: work,
		Settings: explorerun.Settings{Bugs: o.Bugs, Mutant: o.Mutant, Mode: mode, By: fmt.Sprintf("CertifyCrashSafety's exploration (%d schedules, seed %d)", o.Explore, o.Seed)},
		// The exploration is seeded: the test finds the schedule again.
		Replay: func(string) string { return rerun }})
	if err != nil {
		return fmt.Errorf("exploration: %w", err)
	}
	out.Line += fmt.Sprintf(" in %s", time.Since(start).Round(time.Millisecond))
	out.AddTo(rep)
	return nil
}

// probeHung returns the probe's case whose worker hung past its deadline,
// if one did.
func probeHung(pr verdict.Probe) (verdict.CaseResult, bool) {
	for _, r := range pr.Results {
		for _, w := range r.Workers {
			if r.Verdict == verdict.Undecided && w.Exit == "timeout" {
				return r, true
			}
		}
	}
	return verdict.CaseResult{}, false
}

// failedRun keeps the reports and histories of a run that did not certify
// in work (without the stores' data unless ReportDir was set) and returns
// it.
func failedRun(t *testing.T, work string, rep verdict.Report, o Options) Result {
	t.Helper()
	ro := ReportOptions(t)
	if o.ReportDir == "" {
		for _, r := range rep.Results {
			if r.Dir != "" {
				os.RemoveAll(filepath.Join(r.Dir, "data"))
			}
		}
		// A test that expected this run to fail (a mutant, a broken
		// store) and passed has no use for the folder: it would pile up
		// in the temporary directory, run after run.
		t.Cleanup(func() {
			if !t.Failed() {
				os.RemoveAll(work)
			}
		})
	}
	if err := WriteReports(work, rep, ro); err != nil {
		t.Logf("crash matrix: writing reports to %s: %v", work, err)
	}
	return Result{Report: rep, Dir: work, Options: ro}
}

// ReportOptions are the report options of a run from t: the go test
// command of t's package, and per case the command that replays it alone.
func ReportOptions(t *testing.T) report.Options {
	dir := "."
	if wd, err := os.Getwd(); err == nil {
		for root := wd; ; root = filepath.Dir(root) {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				if rel, err := filepath.Rel(root, wd); err == nil && rel != "." {
					dir = "./" + filepath.ToSlash(rel)
				}
				break
			}
			if filepath.Dir(root) == root {
				break
			}
		}
	}
	pattern := RunPattern(t.Name())
	rerun := fmt.Sprintf("go test -count=1 -run '%s' %s", pattern, dir)
	return report.Options{Command: "go test " + dir, Rerun: rerun, Replay: func(r verdict.CaseResult) string {
		if r.Case.Class == explorerun.Class {
			// Not a case of the matrix: the seeded exploration finds it
			// again (its description names its scenario file).
			return rerun
		}
		return fmt.Sprintf("%s=%s go test -count=1 -run '%s' %s", CaseFilterEnv, r.Case.ID, pattern, dir)
	}}
}

// WriteReports writes report.html, report.json and junit.xml into dir.
func WriteReports(dir string, rep verdict.Report, o report.Options) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, w := range map[string]func(*os.File) error{
		"report.html": func(f *os.File) error { return report.WriteHTML(f, rep, o) },
		"report.json": func(f *os.File) error { return report.WriteJSON(f, rep, o) },
		"junit.xml":   func(f *os.File) error { return report.WriteJUnit(f, rep, o) },
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = w(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Describe renders a run that did not certify for a failure message: the
// matrix, each failing case, and where the reports and histories are.
func Describe(backend string, res Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "crash certification of backend %s: %s (exit %d)\n", backend, res.Verdict, res.ExitCode)
	report.WriteTerminal(&b, res.Report, res.Options)
	if res.Dir != "" {
		fmt.Fprintf(&b, "\nreports and histories: %s (open %s)\n", res.Dir, filepath.Join(res.Dir, "report.html"))
	}
	return b.String()
}

// RunPattern turns a test name into a -test.run pattern that matches it
// exactly (each subtest level anchored).
func RunPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexpQuote(p) + "$"
	}
	return strings.Join(parts, "/")
}

func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func runWorker(specPath string, backend sim.Backend, recover *sim.Backend) int {
	spec, err := sim.ReadWorkerSpec(specPath)
	if err == nil {
		var b sim.Backend
		if b, err = sim.WorkerBackend(spec, backend, recover); err == nil {
			err = sim.RunWorker(context.Background(), spec, b, sim.ProcessWorkerOptions())
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashmatrix worker:", err)
		return 3
	}
	return 0
}

// Mutant is a deliberate defect of the reference (or of the stores), the
// slice of the matrix that exposes it, and the invariant that must catch
// it: the proof that the certification bites.
type Mutant struct {
	Name      string
	Options   Options
	Invariant string
	// InProcess marks a mutant whose slice is proved in the in-process
	// mode only (its interleaving needs a stale holder whose lease is
	// still believed, or a dead instance's claim still live, which a real
	// process's start-up can outlast); MutantsCaught, which kills real
	// processes, passes over it.
	InProcess bool
	// Explore, when set, is the exploration that catches the mutant
	// instead of a slice of the matrix (its bug needs an interleaving the
	// matrix does not have): a fixed seed and at most MaxSchedules
	// in-process schedules.
	Explore *ExploreBudget
}

// ExploreBudget fixes an exploration: a seed and a schedule budget.
type ExploreBudget struct {
	Seed         int64
	MaxSchedules int
}

// Mutants lists the reference mutants with the invariant that catches each.
func Mutants() []Mutant {
	crash := []faults.Kind{faults.Crash}
	bug := func(b reference.Bug, inv string, points []faults.Point, kinds []faults.Kind, classes ...string) Mutant {
		return Mutant{string(b), Options{Bugs: []reference.Bug{b}, Points: points, Kinds: kinds, Classes: classes}, inv, false, nil}
	}
	// Lease faults need the stale holder to still believe its lease when
	// it wakes, and a claim of a dead instance to be still live when the
	// next recovery starts: in the in-process mode time is simulated, so
	// the default TTL does.
	leased := func(m Mutant) Mutant { m.InProcess = true; return m }
	return []Mutant{
		bug(reference.BugRecallModelOnResume, "I1", []faults.Point{faults.BeforeGraphWrite}, crash),
		{sim.MutantCreateNotMerge, Options{Mutant: sim.MutantCreateNotMerge, Points: []faults.Point{faults.BeforeGraphApplied}, Kinds: []faults.Kind{faults.Unknown}}, "I3", false, nil},
		bug(reference.BugSkipRevisionCheck, "I2", []faults.Point{faults.ConflictBeforeReplan}, crash),
		bug(reference.BugAdvanceBeforeGraphWrite, "I4", []faults.Point{faults.BeforeGraphWrite}, crash),
		{sim.MutantNoUniqueConstraint, Options{Mutant: sim.MutantNoUniqueConstraint, Points: []faults.Point{faults.PlanSaveBeforeCheckpoint}, Kinds: crash}, "I8", false, nil},
		leased(bug(reference.BugCASOnFreshRevision, "I2", []faults.Point{faults.LeaseAcquire}, []faults.Kind{faults.Split})),
		leased(bug(reference.BugPlanIdentityIgnoresProperties, "I1", nil, nil, "split-brain-same-intent")),
		bug(reference.BugNewOperationOnRetry, "I1", nil, nil, "resubmit-after-failure"),
		bug(reference.BugStateBeforeRegistry, "I6", []faults.Point{faults.BeforeRegistrySave}, crash),
		bug(reference.BugRetryPermanentErrors, "I5", []faults.Point{faults.BeforeGraphWrite}, []faults.Kind{faults.Persistent}),
		leased(bug(reference.BugResumeIgnoresClaim, "I7", []faults.Point{faults.RecoveryBeforeResume}, crash)),
		leased(bug(reference.BugLeaseTrustedAfterExpiry, "I7", nil, nil, "lease-just-after-expiry")),
		bug(reference.BugReplanIDPerAttempt, "I1", nil, nil, catalogue.ReplanResumeClass),
		bug(reference.BugNoOpIgnoresRetraction, "I5", nil, nil, "reingest-after-retraction"),
		bug(reference.BugDeadLetterWithoutReconcile, "I3", []faults.Point{faults.BeforeStateCommit}, []faults.Kind{faults.Permanent}),
		leased(bug(reference.BugIgnoreRefusedStateCAS, "I4", []faults.Point{faults.LeaseAcquire}, []faults.Kind{faults.Expire})),
		bug(reference.BugDeleteSharedEdges, "I3", nil, nil, "retraction-shared-edge"),
		// Between two named windows: only the store-call stalls of the
		// lease-fault cases (sim.BetweenCallsCases) reach them.
		leased(bug(reference.BugCASOnHealedRevision, "I2", nil, nil, catalogue.BetweenCallsClass)),
		leased(bug(reference.BugRevisionReadBeforeLeaseCheck, "I2", nil, nil, catalogue.BetweenCallsClass)),
		leased(bug(reference.BugRebaseFreshPlan, "I2", nil, nil, catalogue.BetweenCallsClass)),
		leased(bug(reference.BugAnswerCurrentRevision, "I9", nil, nil, catalogue.BetweenCallsClass)),
		leased(bug(reference.BugStaleEdgesFromCurrent, "I3", nil, nil, catalogue.BetweenCallsClass)),
		leased(bug(reference.BugRebaseAfterGraphWrite, "I2", nil, nil, catalogue.BetweenCallsClass)),
		// Found by an outside mutant hunt, each escaped the matrix until
		// its case class (and the check it needed) landed.
		bug(reference.BugResubmitIgnoresContent, "I9", nil, nil, "operation-id-reused"),
		bug(reference.BugRetractIDWithoutRevision, "I9", nil, nil, "retract-again"),
		bug(reference.BugNodeIDIgnoresCase, "I6", nil, nil, "entity-variants"),
		bug(reference.BugRetractionSkipsStaleCleanup, "I3", nil, nil, "retraction-shared-edge-crossed"),
		bug(reference.BugReplanIDFromOldOperation, "I1", nil, nil, "replan-after-dead-letter"),
		bug(reference.BugCommitWithoutLeaseCheck, "I7", nil, nil, "stale-writer-after-noop"),
		// Reached by exploration alone until their case classes landed
		// (sim/catalogue/inflight.go).
		{sim.MutantRenewIgnoresHolder, Options{Mutant: sim.MutantRenewIgnoresHolder, Classes: []string{catalogue.StaleHolderRenewsClass}}, "I7", false, nil},
		bug(reference.BugScanSkipsPendingDeadLetter, "I5", nil, nil, catalogue.DeadLetterCutShortClass),
		bug(reference.BugSupportIgnoresPendingPlans, "I3", nil, nil, catalogue.RetractionWhilePlanInFlightClass),
		bug(reference.BugPlanSaveKeyPerAttempt, "I8", []faults.Point{faults.PlanSaveBeforeCheckpoint}, crash),
		bug(reference.BugPlanSaveCheckpointFirst, "I8", []faults.Point{faults.PlanSaveBeforeBusiness}, crash),
	}
}

// MutantsCaught runs every mutant against backend (a subtest each) and
// fails unless each is caught by its invariant. Call it from a top-level
// test (the workers re-execute it).
func MutantsCaught(t *testing.T, backend sim.Backend, base Options) {
	t.Helper()
	for _, m := range Mutants() {
		if m.InProcess {
			continue // proved in the in-process mode (properties' TestEveryMutantCaughtInProcess)
		}
		t.Run(m.Name, func(t *testing.T) {
			o := m.Options
			o.LeaseTTL, o.Parallel, o.ReportDir = base.LeaseTTL, base.Parallel, base.ReportDir
			res := Run(t, backend, o)
			if res.ExitCode != 1 || !slices.Contains(res.Broken(), m.Invariant) {
				t.Errorf("mutant %s on %s: exit %d, broke %v; want exit 1 and %s\n%s", m.Name, backend.Name, res.ExitCode, res.Broken(), m.Invariant, Describe(backend.Name, res))
				return
			}
			// Caught as expected: its reports are of no further use.
			if res.Dir != "" {
				os.RemoveAll(res.Dir)
			}
		})
	}
}
