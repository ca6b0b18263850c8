package properties

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim"
)

// CrashOptions narrow or adjust a crash-matrix run from a test.
type CrashOptions struct {
	// Points, Kinds and Classes select cases (empty: the whole matrix);
	// a store-declared window is selected by its name like a catalogue
	// point.
	Points  []faults.Point
	Kinds   []faults.Kind
	Classes []string
	// LeaseTTL fixes the workers' document lease TTL; zero adapts it to
	// the machine, from 250ms up (sim.Config.Adaptive).
	LeaseTTL time.Duration
	// Parallel cases at once (default 8).
	Parallel int
	// Bugs and Mutant run the reference service or the backend as a
	// deliberate mutant (to prove a checker bites).
	Bugs   []reference.Bug
	Mutant string
	// RandomKills adds that many random-instant kills (the standard
	// script's worker SIGKILLed at a seeded instant of its run).
	RandomKills int
	// Seed seeds the random kills (default 1).
	Seed int64
	// Cases, when set, are run instead of the matrix (after the probe):
	// replays of scenarios or of cases an earlier run reported.
	Cases []sim.Case
	// StopAtFirstFailure ends the run once a case breaks an invariant
	// (cases not yet run are reported undecided): for hunts that only ask
	// whether, and how soon, something is found.
	StopAtFirstFailure bool
	// ReportDir receives report.html, report.json and junit.xml when the
	// run does not certify (default: a fresh temporary directory, named in
	// the failure).
	ReportDir string
}

// CertifyCrashSafety runs the full crash matrix against a store backend
// from a plain `go test`: every window of the failpoint catalogue x every
// fault kind, with worker processes that are re-executions of the test
// binary, killed with SIGKILL at the window; then recovery, then the
// invariants I1–I8 against the stores' contents. A fault-free probe run first
// discovers the crash windows the store declares inside its own methods
// (faults.At); each is run with every faults.StoreKinds kind and reported in
// a section of its own. No code rewriting, no extra
// build step, no server for an embedded backend.
//
// Call it from a top-level test function; the re-executed workers run that
// same test, find their spec in the environment and act as workers. The
// backend's Open must reach the same data from every process of a case
// (CaseEnv names a private directory and a unique namespace).
func CertifyCrashSafety(t *testing.T, backend sim.Backend, opts ...CrashOptions) {
	t.Helper()
	rep := RunCrashMatrix(t, backend, opts...)
	if rep.ExitCode != 0 {
		var b strings.Builder
		report.WriteTerminal(&b, rep, testReportOptions(t))
		t.Fatalf("crash certification of backend %s: %s (exit %d)\n%s", backend.Name, rep.Verdict, rep.ExitCode, b.String())
	}
}

// RunCrashMatrix runs the crash matrix like CertifyCrashSafety and returns
// the report without judging it (for tests that expect a failure). In a
// re-executed worker process it runs the worker and exits.
func RunCrashMatrix(t *testing.T, backend sim.Backend, opts ...CrashOptions) sim.Report {
	t.Helper()
	if spec := os.Getenv(sim.WorkerSpecEnv); spec != "" {
		os.Exit(runWorkerFromEnv(spec, backend))
	}
	var o CrashOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	// Without a fixed TTL the timings adapt to the machine (sim.Config.Adaptive).
	adaptive := o.LeaseTTL <= 0
	if adaptive {
		o.LeaseTTL = 250 * time.Millisecond
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	work, err := os.MkdirTemp("", "crashmatrix-test-")
	if err != nil {
		t.Fatal(err)
	}
	b := backend
	runner, err := sim.NewRunner(sim.Config{Use: &b, Backend: sim.BackendSpec{Name: backend.Name},
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: runPattern(t.Name())},
		WorkDir:  work, LeaseTTL: o.LeaseTTL, Bugs: o.Bugs, Mutant: o.Mutant, Seed: o.Seed, Adaptive: adaptive})
	if err != nil {
		t.Fatalf("crash matrix: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		defer cancel()
	}
	probe, perr := runner.Probe(ctx)
	sel := sim.Selection{Points: o.Points, Kinds: o.Kinds, Classes: o.Classes, RandomKills: o.RandomKills}
	cases := sel.Cases(probe, o.LeaseTTL.Milliseconds(), o.Seed)
	if len(o.Cases) > 0 {
		cases = o.Cases
	}
	if only := os.Getenv(CaseEnv); only != "" {
		cases = slices.DeleteFunc(cases, func(c sim.Case) bool { return !slices.Contains(strings.Split(only, ","), c.ID) })
	}
	for _, p := range o.Points {
		if faults.IsStorePoint(p) && !slices.ContainsFunc(probe.Windows, func(w sim.StoreWindow) bool { return w.Point == p }) {
			t.Fatalf("crash matrix: the probe run never reached store window %s (found %+v); is faults.At called with the context the store method was given?", p, probe.Windows)
		}
	}
	if len(cases) == 0 {
		t.Fatalf("crash matrix: no case matches points %v kinds %v classes %v", o.Points, o.Kinds, o.Classes)
	}
	var progress func(sim.CaseResult)
	if o.StopAtFirstFailure {
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		progress = func(r sim.CaseResult) {
			if r.Verdict == sim.Fail {
				stop()
			}
		}
	}
	rep := runner.RunAll(ctx, cases, o.Parallel, progress)
	rep.WithProbe(probe, perr, sel)
	if rep.ExitCode == 0 {
		_ = os.RemoveAll(work)
		return rep
	}
	dir := o.ReportDir
	if dir == "" {
		dir = work
	}
	if err := writeReports(dir, rep, testReportOptions(t)); err != nil {
		t.Logf("crash matrix: writing reports: %v", err)
	} else {
		t.Logf("crash matrix reports and histories: %s (open report.html)", dir)
	}
	return rep
}

// CaseEnv narrows RunCrashMatrix to the cases it names (ids, comma
// separated): the replay command of a failing case sets it.
const CaseEnv = "CRASHMATRIX_CASE"

// testReportOptions names, for each case, the go test command that runs
// this test again narrowed to that case.
func testReportOptions(t *testing.T) report.Options {
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
	pattern := runPattern(t.Name())
	return report.Options{Command: "go test " + dir, Rerun: fmt.Sprintf("go test -count=1 -run '%s' %s", pattern, dir), Replay: func(r sim.CaseResult) string {
		return fmt.Sprintf("%s=%s go test -count=1 -run '%s' %s", CaseEnv, r.Case.ID, pattern, dir)
	}}
}

func writeReports(dir string, rep sim.Report, o report.Options) error {
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

// runPattern turns a test name into a -test.run pattern that matches it
// exactly (each subtest level anchored).
func runPattern(name string) string {
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

func runWorkerFromEnv(specPath string, backend sim.Backend) int {
	if err := sim.RunWorkerFile(context.Background(), specPath, backend); err != nil {
		fmt.Fprintln(os.Stderr, "crashmatrix worker:", err)
		return 3
	}
	return 0
}

// MutantCase is a deliberate defect of the reference (or of the stores),
// the slice of the matrix that exposes it, and the invariant that must
// catch it: the proof that the certification bites.
type MutantCase struct {
	Name      string
	Options   CrashOptions
	Invariant string
}

// Mutants lists the reference mutants with the invariant that catches each.
func Mutants() []MutantCase {
	crash := []faults.Kind{faults.Crash}
	return []MutantCase{
		{string(reference.BugRecallModelOnResume), CrashOptions{Bugs: []reference.Bug{reference.BugRecallModelOnResume}, Points: []faults.Point{faults.BeforeGraphWrite}, Kinds: crash}, "I1"},
		{sim.MutantCreateNotMerge, CrashOptions{Mutant: sim.MutantCreateNotMerge, Points: []faults.Point{faults.BeforeGraphApplied}, Kinds: []faults.Kind{faults.Unknown}}, "I3"},
		{string(reference.BugSkipRevisionCheck), CrashOptions{Bugs: []reference.Bug{reference.BugSkipRevisionCheck}, Points: []faults.Point{faults.ConflictBeforeReplan}, Kinds: crash}, "I2"},
		{string(reference.BugAdvanceBeforeGraphWrite), CrashOptions{Bugs: []reference.Bug{reference.BugAdvanceBeforeGraphWrite}, Points: []faults.Point{faults.BeforeGraphWrite}, Kinds: crash}, "I4"},
		{sim.MutantNoUniqueConstraint, CrashOptions{Mutant: sim.MutantNoUniqueConstraint, Points: []faults.Point{faults.PlanSaveBeforeCheckpoint}, Kinds: crash}, "I8"},
	}
}

// MutantsCaught runs every mutant against backend (a subtest each) and
// fails unless each is caught by its invariant. Call it from a top-level
// test, like CertifyCrashSafety.
func MutantsCaught(t *testing.T, backend sim.Backend, base CrashOptions) {
	t.Helper()
	for _, m := range Mutants() {
		t.Run(m.Name, func(t *testing.T) {
			o := m.Options
			o.LeaseTTL, o.Parallel, o.ReportDir = base.LeaseTTL, base.Parallel, base.ReportDir
			rep := RunCrashMatrix(t, backend, o)
			if rep.ExitCode != 1 || !slices.Contains(rep.Broken(), m.Invariant) {
				t.Errorf("mutant %s on %s: exit %d, broke %v; want exit 1 and %s", m.Name, backend.Name, rep.ExitCode, rep.Broken(), m.Invariant)
			}
		})
	}
}
