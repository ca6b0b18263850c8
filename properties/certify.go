package properties

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/internal/explorerun"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Backend tells CertifyCrashSafety how every process of a case opens your
// stores (Name and Open are required; see sim.Backend for each field).
type Backend = sim.Backend

// CaseEnv locates one case's data: Open receives it in every worker
// process of the case (see sim.CaseEnv).
type CaseEnv = sim.CaseEnv

// PlanSaveStores are the stores of System B (the plan-save workflow) that
// Backend.OpenPlanSave returns; without it those cases are not applicable.
type PlanSaveStores = sim.PlanSaveStores

// CrashOptions narrow or adjust a crash-matrix run from a test.
type CrashOptions struct {
	// Points, Kinds and Classes select cases (empty: the whole matrix);
	// a store-declared window is selected by its name like a catalogue
	// point.
	Points  []faults.Point
	Kinds   []faults.Kind
	Classes []string
	// Tear is what the torn-write column keeps or loses whole: 0 or
	// faults.TearSector for 512-byte disk sectors, a smaller power of two
	// down to faults.TearByte for a tear inside one sector,
	// faults.TearPage for 4 KiB pages. The column runs beside the
	// power-loss column when the Backend is Embedded (and with Kinds
	// naming faults.TornWrite); a case whose store had synced everything
	// at its window has nothing to tear and is not applicable.
	Tear int
	// LeaseTTL fixes the workers' document lease TTL; zero adapts it to
	// the machine, from 250ms up (sim.Config.Adaptive), on the wall clock.
	LeaseTTL time.Duration
	// WallClock runs the workers' leases, claims and backoff on the wall
	// clock. Off (the default), every worker of a case shares a harness
	// clock that moves only when a worker sleeps or stalls (the service
	// passes its time to TryAcquire and Claim): the verdicts do not
	// depend on the machine's load. Set it when the lock provider compares
	// expiry with a clock of its own (a server-side TTL, a database's
	// now()), which the harness clock cannot move.
	WallClock bool
	// Parallel cases at once (default 4).
	Parallel int
	// Mutant reaches every worker's Backend.Open as CaseEnv.Mutant: a
	// backend can switch on a deliberate defect of its own with it, to
	// prove the certification catches it.
	Mutant string
	// RandomKills adds that many random kills (the standard script's
	// worker SIGKILLed at a seeded instant of its run: before a store call
	// or inside a commit of the embedded database, so that a finding
	// replays; see docs/fault-kinds.md), seeded by Seed (default 1). They
	// are a class of their own (sim.RandomKillClass): with Points or Kinds,
	// or Classes without it, none would run, and the run fails saying so.
	RandomKills int
	Seed        int64
	// Explore is how many seeded exploration schedules run after a matrix
	// that certified, in-process (random schedules of several workers,
	// repeated crashes, crashes in recovery, pauses past the lease,
	// retractions racing ingestions; seed Seed): a schedule that breaks
	// an invariant is shrunk, written as a scenario in the run's folder
	// and fails the run. Zero runs the default count on the whole matrix
	// and none on a part of it (Points, Kinds, Classes); a negative value
	// turns it off (the report says "exploration: off").
	Explore int
	// ReportDir, when set, holds the run's working data; a run that does
	// not certify leaves its reports and histories in a folder under it,
	// named in the failure. Unset: a temporary folder, kept (without the
	// stores' data) only when the run fails.
	ReportDir string
	// RecoverWith, when set, is another build of the store (version B,
	// the next release): the matrix then certifies an upgrade in the
	// middle of in-flight operations. Every case runs on backend (version
	// A) until a worker dies by a kill (its crash, the power loss that
	// follows it, a random or durable-step kill); every worker after that
	// (recovery, the caller's resubmissions) and the snapshots the
	// invariants judge open RecoverWith on the data A left. A case in
	// which no worker dies runs on A alone. RecoverWith must keep its
	// data where backend does (Embedded alike) and provide System B's
	// stores if backend does. The exploration does not run (it runs
	// in-process, on one build): certify each build on its own as well.
	// See docs/certify-go-store.md.
	RecoverWith *Backend
	// Service, when set, is the command line of a service of yours, in
	// any language, that speaks the service protocol
	// (docs/service-protocol.md), e.g. "java -jar target/service.jar",
	// run in the test's folder: the matrix then runs its intents on it
	// instead of the reference (each worker starts it as its child), with
	// backend holding the stores the service takes from the harness, and
	// judges what the service did (what the invariants cannot see of it
	// is listed in the report, never counted as held). ServiceBugs
	// switches on broken variants of it, passed in hello: the service
	// refuses a name it does not know, and the run fails saying so. Its
	// exploration runs with worker processes.
	Service     string
	ServiceBugs []string
	// ExpectBroken makes the run a negative control: the invariants
	// ("I7", or a full name such as "I7 leases") a deliberately broken
	// store must break. The test then passes when every one of them broke
	// in some case, and fails when one did not (or the run certified),
	// whatever else broke or stayed undecided: the returned report says
	// that.
	ExpectBroken []string
}

// CertifyCrashSafety runs the full crash matrix against a store backend
// from a plain `go test`: every window of the failpoint catalogue × every
// fault kind, with worker processes that are re-executions of the test
// binary, killed with SIGKILL at the window; then recovery, then the
// invariants I1–I9 against the stores' contents. A fault-free probe run
// first discovers the crash windows the store declares inside its own
// methods (faults.At); each is run with every faults.StoreKinds kind. It
// fails t with the matrix, each broken invariant and the folder of the
// reports. It returns the run's report: every case with its verdict, its
// violations (the invariant, the message, the evidence) and its history;
// Broken lists the invariants broken.
//
// With CrashOptions.ExpectBroken it is a negative control instead: it
// fails t unless every invariant named there broke (see
// ExampleCertifyCrashSafety_negativeControl).
//
// Call it from a top-level test function: the re-executed workers run that
// same test, find their spec in the environment and act as workers. Open
// must reach the same data from every process of a case. Options beyond
// the first add their ExpectBroken to it; their other fields are ignored.
func CertifyCrashSafety(t *testing.T, backend Backend, opts ...CrashOptions) verdict.Report {
	t.Helper()
	o, expect, err := crashOptions(opts)
	if err != nil {
		t.Fatalf("CertifyCrashSafety: %v", err)
	}
	res := crashrun.Run(t, backend, o)
	if len(expect) > 0 {
		broken := res.Broken()
		if missing := unbroken(expect, broken); len(missing) > 0 {
			t.Fatalf("negative control: backend %s was expected to break %v; it broke %v, not %v\n%s",
				backend.Name, expect, broken, missing, crashrun.Describe(backend.Name, res))
		}
		t.Logf("negative control: backend %s broke %v as expected (all broken: %v; %d cases fail, %d undecided, in %v)", backend.Name,
			expect, broken, res.Counts[verdict.Fail], res.Counts[verdict.Undecided], res.Took.Round(time.Millisecond))
		return res.Report
	}
	if res.ExitCode != 0 {
		t.Fatal(crashrun.Describe(backend.Name, res))
	}
	t.Log(certified(backend.Name, res.Report))
	return res.Report
}

// certified is the line a certifying run logs: what it ran (a subset of
// the matrix, where options selected one) and whether power loss was
// among it (how many cases, or why it could not be tested), as its
// reports say, so that a test's output reads as no more and no less than
// was certified.
func certified(name string, rep verdict.Report) string {
	what := "certified"
	if rep.Subset != "" {
		what = fmt.Sprintf("certified (a subset, %s; not the whole matrix)", rep.Subset)
	}
	subject := "backend " + name
	if strings.HasPrefix(rep.Backend, "service ") {
		subject = rep.Backend // "service NAME (harness stores: BACKEND)"
	}
	line := fmt.Sprintf("%s %s: %d cases pass, %d not applicable, in %v", subject, what,
		rep.Counts[verdict.Pass], rep.Counts[verdict.NotApplicable], rep.Took.Round(time.Millisecond))
	power, disk := 0, 0
	for _, r := range rep.Results {
		if r.Case.Kind.IsPowerLoss() && r.Verdict == verdict.Pass {
			power++
		}
		if r.Case.Kind.IsDisk() && r.Verdict == verdict.Pass {
			disk++
		}
	}
	switch {
	case rep.PowerLoss != "":
		line += "; " + rep.PowerLoss
	case power > 0:
		line += fmt.Sprintf("; power loss: tested (%d of the cases)", power)
	default:
		line += "; power loss: no case of this run"
	}
	if disk > 0 {
		line += fmt.Sprintf("; disk errors: tested (%d of the cases)", disk)
	}
	if rep.Exploration != "" {
		line += "; " + rep.Exploration
	}
	return line
}

// exploreCount is the schedules CrashOptions.Explore asks for.
func exploreCount(o CrashOptions) int {
	switch {
	case o.Explore < 0:
		return 0
	case o.Explore == 0 && len(o.Points)+len(o.Kinds)+len(o.Classes) == 0:
		return explorerun.DefaultCount
	}
	return o.Explore
}

// unbroken returns the expected invariants that did not break.
func unbroken(expect, broken []string) []string {
	var missing []string
	for _, inv := range expect {
		if !slices.Contains(broken, inv) {
			missing = append(missing, inv)
		}
	}
	return missing
}

// crashOptions turns the caller's options into the run's, and the
// expected invariants into short names; an unknown name is an error.
func crashOptions(opts []CrashOptions) (crashrun.Options, []string, error) {
	if len(opts) == 0 {
		return crashrun.Options{Explore: explorerun.DefaultCount}, nil, nil
	}
	var expect []string
	for _, o := range opts {
		for _, name := range o.ExpectBroken {
			inv, err := check.ParseInvariant(name)
			if err != nil {
				return crashrun.Options{}, nil, fmt.Errorf("CrashOptions.ExpectBroken: %w", err)
			}
			if !slices.Contains(expect, inv.Short()) {
				expect = append(expect, inv.Short())
			}
		}
	}
	o := opts[0]
	// As the command line's: a lease TTL reaches the workers in whole
	// milliseconds (1ns was none, and the service's own 2s default), and
	// no count is negative.
	switch {
	case o.LeaseTTL < 0 || o.LeaseTTL%time.Millisecond != 0:
		return crashrun.Options{}, nil, fmt.Errorf("CrashOptions.LeaseTTL %s: want a whole number of milliseconds, at least 1ms (0 adapts it)", o.LeaseTTL)
	case o.Parallel < 0:
		return crashrun.Options{}, nil, fmt.Errorf("CrashOptions.Parallel %d: want at least 1 (0 for the default)", o.Parallel)
	case o.RandomKills < 0:
		return crashrun.Options{}, nil, fmt.Errorf("CrashOptions.RandomKills %d: want at least 0", o.RandomKills)
	case o.RecoverWith != nil && o.Explore > 0:
		return crashrun.Options{}, nil, fmt.Errorf("CrashOptions.Explore %d with RecoverWith: the exploration runs in-process, on one build of the store; certify each build on its own (RecoverWith's runs explore nothing)", o.Explore)
	case o.RecoverWith != nil && (o.RecoverWith.Name == "" || o.RecoverWith.Open == nil):
		return crashrun.Options{}, nil, fmt.Errorf("CrashOptions.RecoverWith: Name and Open are required, as for the backend")
	}
	var svc *sim.ServiceSpec
	var bugs []reference.Bug
	switch {
	case o.Service != "":
		svc = &sim.ServiceSpec{Command: o.Service}
		for _, b := range o.ServiceBugs {
			if !serviceBug.MatchString(b) {
				return crashrun.Options{}, nil, fmt.Errorf("CrashOptions.ServiceBugs %q: a service's broken variant is named in lower-case letters, digits and -", b)
			}
			bugs = append(bugs, reference.Bug(b))
		}
	case len(o.ServiceBugs) > 0:
		return crashrun.Options{}, nil, fmt.Errorf("CrashOptions.ServiceBugs %v without Service: they are a service's broken variants (name its command in Service)", o.ServiceBugs)
	}
	if o.Tear != 0 { // the default, pages
		if err := faults.CheckTear(o.Tear); err != nil {
			return crashrun.Options{}, nil, fmt.Errorf("CrashOptions.Tear: %w", err)
		}
	}
	return crashrun.Options{Points: o.Points, Kinds: o.Kinds, Classes: o.Classes, Tear: o.Tear, LeaseTTL: o.LeaseTTL,
		Parallel: o.Parallel, Mutant: o.Mutant, ReportDir: o.ReportDir, RandomKills: o.RandomKills, Seed: o.Seed, WallClock: o.WallClock,
		Explore: exploreCount(o), RecoverWith: o.RecoverWith, Service: svc, Bugs: bugs}, expect, nil
}

var serviceBug = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
