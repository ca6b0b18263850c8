// Package servicepython certifies the LangGraph example service
// (plansave_graph.py) through the service protocol: crashmatrix's runner
// starts it as each worker's child, crashes it at the windows it declares
// and judges I8 on what it reads back. Its Python packages are installed
// by install.sh into a venv under the cache (the test runs the script).
package servicepython

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/servicetest"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The test binary is also a crashmatrix worker, when the supervisor
// re-executes it.
func TestMain(m *testing.M) { servicetest.Main(m) }

// here is the example's folder.
var here = servicetest.Here

// python installs the example's packages (install.sh) and returns the
// venv's interpreter.
func python(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(here(), "install.sh")).Output()
	if err != nil {
		t.Fatalf("install.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func runner(t *testing.T, command string, bugs ...string) *sim.Runner {
	t.Helper()
	return servicetest.Runner(t, command, here(), bugs...)
}

var planSaveWindows = []faults.Point{faults.PlanSaveBeforeApprove, faults.PlanSaveBeforeBusiness, faults.PlanSaveBeforeCheckpoint}

func run(t *testing.T, r *sim.Runner, kinds ...faults.Kind) verdict.Report {
	t.Helper()
	return servicetest.Run(t, r, planSaveWindows, kinds...)
}

// TestLangGraphServiceCertifies: the LangGraph graph with the design
// document's PlanStore passes every crash, error and unknown-outcome case
// at its three catalogue windows, and each case's fault fired.
func TestLangGraphServiceCertifies(t *testing.T) {
	py := python(t)
	r := runner(t, py+" plansave_graph.py")
	d := r.Config().Service.Declared
	if d.Name != "langgraph-plansave" || len(d.Systems) != 1 || d.Systems[0] != "plansave" {
		t.Fatalf("declared %+v", d)
	}
	servicetest.Passed(t, run(t, r, faults.Crash, faults.Transient, faults.Unknown), true)
}

// TestLangGraphBrokenVariantsCaught: each broken variant, asked for with
// --bug as a team would (hello's bugs), fails I8: without UNIQUE(owner,
// operation_id) the save retried after a crash adds a second row; with
// the operation_id made anew on retry the retried save adds a row under
// the new id (the harness holds the thread to the id its start gave).
func TestLangGraphBrokenVariantsCaught(t *testing.T) {
	py := python(t)
	for _, bug := range []string{"no-unique", "new-operation-id-on-retry"} {
		t.Run(bug, func(t *testing.T) {
			r := runner(t, py+" plansave_graph.py", bug)
			rep := run(t, r, faults.Crash)
			caught := false
			for _, res := range rep.Results {
				for _, v := range res.Violations {
					if v.Invariant == check.I8 {
						caught = true
						t.Logf("%s: %s %s", res.Case.ID, v.Invariant, v.Message)
					}
				}
			}
			if !caught || rep.ExitCode == 0 {
				t.Fatalf("--bug %s not caught (exit %d)", bug, rep.ExitCode)
			}
		})
	}
}

// TestUnknownBugRefused: a misspelt broken variant must not pass as a
// certified service, nor fail as a broken one: the service refuses it at
// the hello of the run's probe, so the run cannot start (a setup error,
// which certify reports with exit 2, as service.txtar shows for the Go
// speaker), and the error names the bug.
func TestUnknownBugRefused(t *testing.T) {
	py := python(t)
	cfg := sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1,
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"},
		Service:  &sim.ServiceSpec{Command: py + " plansave_graph.py", WorkDir: here()},
		Bugs:     []reference.Bug{"no-unqiue"}}
	_, err := sim.NewRunner(cfg)
	if err == nil {
		t.Fatal("--bug no-unqiue: the run started; want the service's refusal at hello")
	}
	for _, want := range []string{"the service refused hello: unsupported", "unknown bug no-unqiue"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// TestLangGraphCheckpointerWindows crashes the service inside LangGraph's
// own SqliteSaver, at its first checkpoint put and its first put_writes
// (the service's windows service/checkpointer.put and .put_writes, as the
// probe of a run finds them), with and without the write going through
// before the kill: the thread is saved once whatever the checkpointer had
// written.
func TestLangGraphCheckpointerWindows(t *testing.T) {
	py := python(t)
	r := runner(t, py+" plansave_graph.py")
	ws := []catalogue.StoreWindow{
		{Point: "service/checkpointer.put", System: faults.PlanSave, Hits: 1, Methods: []string{"plansave.start"}},
		{Point: "service/checkpointer.put_writes", System: faults.PlanSave, Hits: 1, Methods: []string{"plansave.start"}},
	}
	cases := catalogue.Filter(catalogue.Lease(r.Config().LeaseTTL).StoreMatrix(ws), nil, []faults.Kind{faults.Crash, faults.Unknown}, nil)
	if len(cases) != 4 {
		t.Fatalf("%d cases, want 4", len(cases))
	}
	start := time.Now()
	rep := r.RunAll(context.Background(), cases, 2, nil)
	t.Logf("%d cases in %s", len(rep.Results), time.Since(start).Round(time.Millisecond))
	for _, res := range rep.Results {
		t.Logf("%s: %s %v %v", res.Case.ID, res.Verdict, res.Violations, res.Notes)
		if res.Verdict != verdict.Pass && res.Verdict != verdict.NotApplicable {
			t.Errorf("%s: %s", res.Case.ID, res.Verdict)
		}
		if res.Verdict == verdict.Pass && len(res.Hits) == 0 {
			t.Errorf("%s: passed without a fault firing", res.Case.ID)
		}
	}
}

// TestProtocheckCatchesNewOperationID runs the stand-in harness
// (protocheck.py: every line validated against the schema, I8 judged on
// every plan row of the thread's owner) on the variant that makes the
// operation_id anew on retry: a crash after the business commit leaves a
// second row under the new id (crashmatrix's own I8 catches it too:
// TestLangGraphBrokenVariantsCaught, TestCertifyCLI).
func TestProtocheckCatchesNewOperationID(t *testing.T) {
	py := python(t)
	cmd := exec.Command(py, "protocheck.py", "--expect-fail", "I8", "--bug", "new-operation-id-on-retry",
		"--window", "planSaveBeforeCheckpoint", "--", py, "plansave_graph.py")
	cmd.Dir = here()
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("protocheck: %v", err)
	}
	for _, want := range []string{"planSaveBeforeCheckpoint#1 crash              FAIL I8: 2 plan rows for one logical save", "0 pass, 2 FAIL"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("protocheck's output lacks %q", want)
		}
	}
}

// TestCertifyCLI runs the guide's commands (docs/certify-your-service.md,
// section 6) with the crashmatrix binary: the service certifies at the
// window where a retried save meets its first row, the variant that makes
// the operation_id anew on retry is not certified and I8 is named, and a
// misspelt variant is a setup error (exit 2), never a verdict.
func TestCertifyCLI(t *testing.T) {
	py := python(t)
	servicetest.CertifyCLI(t, filepath.Join(here(), "..", ".."), here(), py+" plansave_graph.py",
		[]string{"--point", "planSaveBeforeCheckpoint", "--kind", "crash", "--quiet"}, []servicetest.CLICase{
			{Name: "correct", Exit: 0, Want: "CERTIFIED"},
			{Name: "new-operation-id-on-retry", Args: []string{"--bug", "new-operation-id-on-retry"}, Exit: 1, Want: "NOT CERTIFIED: broken I8"},
			{Name: "misspelt", Args: []string{"--bug", "no-unqiue"}, Exit: 2, Want: "the service refused hello: unsupported: unknown bug no-unqiue"},
		})
}

// TestLangGraphDurableStepSweep runs the durable-step sweep on the
// service's own files: it reports its System B calls (reports: ["calls"]:
// plans.save around PlanStore.save, checkpoints.put around the real
// SqliteSaver's put and put_writes), so the probe counts the syncs each
// takes on the lazy mount. LangGraph's checkpointer (WAL) syncs its WAL
// once per write: no gap inside, no case. PlanStore.save (rollback
// journal, synchronous=EXTRA) takes six steps (the journal, its
// directory, the journal's header, the database, the journal's unlink,
// the directory): at each of the five gaps the kill, the power cut and the
// torn write pass (SQLite rolls the hot journal back, the resumed save
// inserts the row once), each with its kill fired; the torn write is run
// at the last gap only (the sweep makes one at each).
func TestLangGraphDurableStepSweep(t *testing.T) {
	py := python(t)
	r := runner(t, py+" plansave_graph.py")
	if d := r.Config().Service.Declared; !d.Has("calls") {
		t.Fatalf("declared %+v, want reports: [calls]", d)
	}
	start := time.Now()
	pr, err := r.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !r.WatchesDurableSteps() {
		t.Fatalf("no durable steps watched (power loss: %q)", r.PowerLossUntested())
	}
	steps := map[string][]int{}
	for _, c := range pr.Durable {
		steps[c.Method] = append(steps[c.Method], len(c.Ops))
		t.Logf("probe: call %d %s: %v", c.Call, c.Method, c.Ops)
	}
	if len(steps["checkpoints.put"]) == 0 || slices.ContainsFunc(steps["checkpoints.put"], func(n int) bool { return n != 1 }) {
		t.Errorf("the checkpointer's writes took durable steps %v, want one each (its WAL's sync)", steps["checkpoints.put"])
	}
	if len(steps["plans.save"]) != 1 || steps["plans.save"][0] < 2 {
		t.Fatalf("PlanStore.save took durable steps %v, want one save of two or more", steps["plans.save"])
	}
	cases, left := r.ServiceCases(catalogue.DurableStepCases(pr.Durable))
	gaps := steps["plans.save"][0] - 1
	if len(left) != 0 || len(cases) != 3*gaps {
		t.Fatalf("%d sweep cases (left out %v), want a kill, a power cut and a torn write at each of plans.save's %d gaps", len(cases), left, gaps)
	}
	// The torn write only after the journal's unlink (the last gap, where
	// the power cut brings the journal back): a Python service's case
	// takes seconds, and the suite's time is kept small.
	cases = slices.DeleteFunc(cases, func(c catalogue.Case) bool {
		return c.Kind == faults.TornWrite && c.Steps[0].Durable.Step != gaps
	})
	probed := time.Since(start)
	rep := r.RunAll(context.Background(), cases, 2, nil)
	t.Logf("probe %s, %d sweep cases in %s", probed.Round(time.Millisecond), len(rep.Results), (time.Since(start) - probed).Round(time.Millisecond))
	if len(rep.Results) != len(cases) {
		t.Fatalf("%d results of %d cases", len(rep.Results), len(cases))
	}
	for _, res := range rep.Results {
		t.Logf("%s: %s %v", res.Case.ID, res.Verdict, res.Broken())
		fired := slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "SIGKILLed right after") })
		if res.Verdict != verdict.Pass || !fired || !strings.HasPrefix(res.Case.Steps[0].Durable.Method, "plans.save") {
			t.Errorf("%s: %s %v, kill fired %v: %q", res.Case.ID, res.Verdict, res.Violations, fired, res.Notes)
		}
	}
}
