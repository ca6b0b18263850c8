// Package servicejava certifies the Java example service (a
// GraphIngestionService in the shape of the design document, on JDBC
// stores of its own) through the service protocol: crashmatrix's runner
// starts it as each worker's child, crashes it at the windows it declares
// and judges the invariants on what it saw and reads back. build.sh builds
// it with Maven (the test runs the script).
package servicejava

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/servicetest"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The test binary is also a crashmatrix worker, when the supervisor
// re-executes it.
func TestMain(m *testing.M) { servicetest.Main(m) }

// here is the example's folder.
var here = servicetest.Here

// service builds the example with build.sh and returns its command line.
func service(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the Java service with Maven and runs the crash matrix on it")
	}
	start := time.Now()
	out, err := exec.Command(filepath.Join(here(), "build.sh")).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("build.sh: %v\n%s", err, stderr)
	}
	t.Logf("build.sh: %s", time.Since(start).Round(time.Millisecond))
	return strings.TrimSpace(string(out))
}

// stageWindows are the windows of the design document's stage order.
var stageWindows = []faults.Point{faults.BeforeExtract, faults.BeforePrepare, faults.BeforeGraphWrite, faults.BetweenGraphBatches,
	faults.BeforeGraphApplied, faults.BeforeRegistrySave, faults.BeforeStateCommit, faults.BeforeRecordVersion,
	faults.BeforeStateCommitted, faults.BeforeCompleted}

// TestJavaServiceCertifies: the Java GraphIngestionService passes a crash,
// and an unknown outcome, at every window of its stage order, and each
// case's fault fired.
func TestJavaServiceCertifies(t *testing.T) {
	cmd := service(t)
	r := servicetest.Runner(t, cmd, here())
	d := r.Config().Service.Declared
	if d.Name != "agents-flex-graph-ingestion-java" || !slices.Equal(d.HarnessStores, []string{"graph", "locks", "checkpoints", "plans"}) {
		t.Fatalf("declared %+v", d)
	}
	servicetest.Passed(t, servicetest.Run(t, r, stageWindows, faults.Crash, faults.Unknown), false)
}

// TestJavaProbeLeavesSystemBOut: the fault-free probe that precedes the
// whole matrix runs to its end on the Java service, which implements
// System A only (its System B stores are the harness's): no plan-save
// probe runs on it, so nothing fails I8 for intents it never served.
func TestJavaProbeLeavesSystemBOut(t *testing.T) {
	cmd := service(t)
	r := servicetest.Runner(t, cmd, here())
	pr, err := r.Probe(context.Background())
	for _, res := range pr.Results {
		t.Logf("probe %s: %s %v %v", res.Case.ID, res.Verdict, res.Violations, res.Notes)
		if res.Case.System == faults.PlanSave {
			t.Errorf("probe %s ran System B on a service without it", res.Case.ID)
		}
	}
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if !slices.ContainsFunc(pr.Results, func(res verdict.CaseResult) bool { return res.Case.ID == "probe-durable" }) {
		t.Errorf("the probe did not reach its durable-step probe")
	}
}

// TestJavaBrokenVariantsCaught: each broken variant, asked for with --bug
// as a team would (hello's bugs), is not certified, and the invariant that
// names its defect is broken.
func TestJavaBrokenVariantsCaught(t *testing.T) {
	cmd := service(t)
	for _, c := range []struct {
		bug   string
		point faults.Point
		inv   string
	}{
		// Resumed after a crash before the graph write, the operation asks
		// the model again for a plan already frozen.
		{"resume-calls-model", faults.BeforeGraphWrite, "I1"},
		// Crashed between the early state commit and the graph write, the
		// resumed operation finds its state committed and finishes without
		// writing the graph the state says is there.
		{"state-before-graph-applied", faults.BeforeGraphWrite, "I3"},
	} {
		t.Run(c.bug, func(t *testing.T) {
			r := servicetest.Runner(t, cmd, here(), c.bug)
			rep := servicetest.Run(t, r, []faults.Point{c.point}, faults.Crash)
			for _, res := range rep.Results {
				for _, v := range res.Violations {
					t.Logf("%s: %s %s", res.Case.ID, v.Invariant, v.Message)
				}
			}
			if rep.ExitCode != 1 || !slices.Contains(rep.Broken(), c.inv) {
				t.Fatalf("--bug %s: exit %d, broke %v; want exit 1 and %s", c.bug, rep.ExitCode, rep.Broken(), c.inv)
			}
		})
	}
}

// TestCertifyCLI runs the guide's commands (docs/certify-your-service.md,
// "A Java service") with the crashmatrix binary: the service certifies at
// the window before the graph write, each broken variant is not certified
// with its invariant named, and a misspelt variant is a setup error (exit
// 2), never a verdict.
func TestCertifyCLI(t *testing.T) {
	cmd := service(t)
	servicetest.CertifyCLI(t, filepath.Join(here(), "..", ".."), here(), cmd,
		[]string{"--point", "beforeGraphWrite", "--kind", "crash", "--quiet"}, []servicetest.CLICase{
			{Name: "correct", Exit: 0, Want: "CERTIFIED (a subset"},
			{Name: "resume-calls-model", Args: []string{"--bug", "resume-calls-model"}, Exit: 1, Want: "NOT CERTIFIED: broken I1"},
			{Name: "state-before-graph-applied", Args: []string{"--bug", "state-before-graph-applied"}, Exit: 1, Want: "I3 convergent graph"},
			{Name: "misspelt", Args: []string{"--bug", "resume-calls-modle"}, Exit: 2, Want: "the service refused hello: unsupported: unknown bug resume-calls-modle"},
		})
}

// TestExploreThroughService: certify's exploration runs through the
// service protocol (seeded schedules of several workers, repeated crashes
// and retractions, in real processes, drawn only where the service can
// run them: none is left out): after the matrix's slice
// at beforeExtract certified, 12 schedules find nothing in the correct
// service, and find and shrink the broken variant's I4 (its state
// committed before GRAPH_APPLIED; the shrunk schedule breaks I3 too) that
// the slice did not reach, written as a scenario that names the service.
func TestExploreThroughService(t *testing.T) {
	cmd := service(t)
	servicetest.CertifyCLI(t, filepath.Join(here(), "..", ".."), here(), cmd,
		[]string{"--point", "beforeExtract", "--kind", "crash", "--explore", "12", "--quiet"}, []servicetest.CLICase{
			{Name: "correct", Exit: 0, Want: "exploration: 12 schedules of seed 1 (process kills), no invariant broken in "},
			{Name: "state-before-graph-applied", Args: []string{"--bug", "state-before-graph-applied"}, Exit: 1, Want: "of 12 schedules of seed 1 (process kills) broke I4"},
		})
}

// TestRunScenariosThroughService: crashmatrix run replays scenario files
// through the service (--service-cmd), as it replays an exploration's
// finding: two of the library's System A scenarios pass on the Java
// service.
func TestRunScenariosThroughService(t *testing.T) {
	cmd := service(t)
	root := filepath.Join(here(), "..", "..")
	run := exec.Command(servicetest.BuildCLI(t, root), "run", "--service-cmd", cmd,
		filepath.Join(root, "scenarios", "library", "class-duplicate-delivery.yaml"),
		filepath.Join(root, "scenarios", "library", "class-crash-during-recovery.yaml"))
	run.Dir = here()
	out, err := run.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("crashmatrix run --service-cmd: %v", err)
	}
	for _, want := range []string{"ok    class-duplicate-delivery", "ok    class-crash-during-recovery"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
