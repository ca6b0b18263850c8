package properties_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/internal/explorerun"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/explore"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The embedded default passes the whole matrix, with real process kills of
// re-executed test binaries: what a store author's own go test does.
func TestCertifySQLite(t *testing.T) {
	rep := properties.CertifyCrashSafety(t, embedded.SQLite())
	// The whole matrix is followed by the seeded exploration, by default.
	if want := fmt.Sprintf("exploration: %d schedules of seed 1 (in-process), no invariant broken", explorerun.DefaultCount); !strings.HasPrefix(rep.Exploration, want) {
		t.Errorf("the report says %q, want %q", rep.Exploration, want)
	}
}

// A backend with only Name and Open (the store-author guide's snippet: no System B)
// certifies: the plan-save cases are listed as not applicable, never
// failed.
func TestCertifyWithoutSystemB(t *testing.T) {
	b := properties.Backend{
		Name: "sqlite-system-a-only",
		Open: func(_ context.Context, env properties.CaseEnv) (reference.Stores, error) {
			if err := os.MkdirAll(env.Dir, 0o755); err != nil {
				return reference.Stores{}, err
			}
			return sqlite.Open(filepath.Join(env.Dir, "store.db"), sqlite.Options{})
		},
	}
	o := crashrun.Options{Points: []faults.Point{faults.BeforeGraphApplied, faults.PlanSaveBeforeBusiness, faults.PlanSaveBeforeCheckpoint},
		Kinds: []faults.Kind{faults.Crash}}
	res := crashrun.Run(t, b, o)
	if res.ExitCode != 0 {
		t.Fatalf("want exit 0 with System B not applicable:\n%s", crashrun.Describe(b.Name, res))
	}
	if res.Counts[verdict.NotApplicable] != 2 || res.Counts[verdict.Pass] != 1 {
		t.Errorf("counts %v: want 1 pass and 2 not applicable", res.Counts)
	}
	var out strings.Builder
	report.WriteTerminal(&out, res.Report, res.Options)
	if !strings.Contains(out.String(), "2 not applicable") || !strings.Contains(out.String(), "does not provide System B") {
		t.Errorf("the matrix does not say why the System B cases did not run:\n%s", out.String())
	}
	// Nothing but not-applicable cases is no certificate.
	only := crashrun.Run(t, b, crashrun.Options{Points: []faults.Point{faults.PlanSaveBeforeCheckpoint}, Kinds: []faults.Kind{faults.Crash}})
	if only.ExitCode != 2 {
		t.Errorf("a run of only not-applicable cases: exit %d, want 2 (undecided)", only.ExitCode)
	}
	if only.Dir != "" {
		os.RemoveAll(only.Dir)
	}
}

// The in-memory adapter must fail: after a restart the plan is gone. The
// failing run keeps its reports and histories under ReportDir, names the
// folder, and removes nothing else from ReportDir.
func TestCrashMatrixMemoryFails(t *testing.T) {
	reports := t.TempDir()
	res := crashrun.Run(t, embedded.Memory(), crashrun.Options{ReportDir: reports,
		Points: []faults.Point{faults.BeforeGraphApplied, faults.PlanSaveBeforeCheckpoint}, Kinds: []faults.Kind{faults.Crash}})
	if res.ExitCode != 1 {
		t.Fatalf("memory backend: exit code %d, want 1 (an invariant broke)", res.ExitCode)
	}
	broken := res.Broken()
	for _, want := range []string{"I5", "I8"} {
		if !slices.Contains(broken, want) {
			t.Errorf("memory backend broke %v, want %s among them", broken, want)
		}
	}
	found := false
	for _, r := range res.Results {
		for _, v := range r.Violations {
			if v.Invariant == check.I5 && strings.Contains(v.Message, "plan and stage are gone") {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no readable I5 finding saying the plan is gone after restart")
	}
	if filepath.Dir(res.Dir) != reports {
		t.Fatalf("the failing run's folder %q is not under ReportDir %s", res.Dir, reports)
	}
	for _, f := range []string{"report.html", "report.json", "junit.xml"} {
		if _, err := os.Stat(filepath.Join(res.Dir, f)); err != nil {
			t.Errorf("report %s: %v", f, err)
		}
	}
	for _, r := range res.Results {
		if !strings.HasPrefix(r.Dir, res.Dir+string(filepath.Separator)) {
			t.Errorf("case %s kept its history in %s, outside %s", r.Case.ID, r.Dir, res.Dir)
		} else if _, err := os.Stat(filepath.Join(r.Dir, "history.jsonl")); err != nil {
			t.Errorf("case %s: %v", r.Case.ID, err)
		}
	}
	if msg := crashrun.Describe("memory", res); !strings.Contains(msg, filepath.Join(res.Dir, "report.html")) {
		t.Errorf("the failure message does not name the report:\n%s", msg)
	}
}

// Without ReportDir a failing run keeps only reports and histories (the
// stores' data is removed) in one temporary folder that the failure names;
// a test that expected the failure and passed leaves nothing behind.
func TestFailingRunKeepsNoStoreData(t *testing.T) {
	b := embedded.SQLite()
	b.Name = "sqlite-mutant"
	var dir string
	t.Run("expected failure", func(t *testing.T) {
		res := crashrun.Run(t, b, crashrun.Options{Mutant: sim.MutantCreateNotMerge,
			Points: []faults.Point{faults.BeforeGraphApplied}, Kinds: []faults.Kind{faults.Unknown}})
		if res.ExitCode != 1 || res.Dir == "" {
			t.Fatalf("mutant run: exit %d dir %q, want 1 and a folder", res.ExitCode, res.Dir)
		}
		dir = res.Dir
		// Where certify puts a run's folder: TMPDIR when set, else
		// /dev/shm when it has room, else the temporary directory.
		want := sim.CaseRoot()
		if want == "" {
			want = os.TempDir()
		}
		if filepath.Dir(res.Dir) != filepath.Clean(want) {
			t.Errorf("folder %s is not under %s", res.Dir, want)
		}
		for _, r := range res.Results {
			if _, err := os.Stat(filepath.Join(r.Dir, "data")); !os.IsNotExist(err) {
				t.Errorf("case %s still holds its store data (%v)", r.Case.ID, err)
			}
			if _, err := os.Stat(filepath.Join(r.Dir, "history.jsonl")); err != nil {
				t.Errorf("case %s lost its history: %v", r.Case.ID, err)
			}
		}
	})
	if dir == "" {
		return
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		os.RemoveAll(dir)
		t.Errorf("the folder of a run whose test passed is still there (%v)", err)
	}
}

// Each reference mutant is caught by the invariant that names its defect:
// recall-model-on-resume by I1, create-instead-of-merge by I3,
// skip-revision-check by I2, advance-before-graph-write by I4, and System B
// without its unique constraint by I8.
func TestMutantsCaught(t *testing.T) {
	crashrun.MutantsCaught(t, embedded.SQLite(), crashrun.Options{})
}

// A failing case's replay command narrows the run to that case through
// CRASHMATRIX_CASE.
func TestCrashMatrixRunsOnlyTheNamedCase(t *testing.T) {
	t.Setenv(crashrun.CaseFilterEnv, "beforegraphapplied-crash")
	res := crashrun.Run(t, embedded.Memory(), crashrun.Options{Points: []faults.Point{faults.BeforeGraphApplied}})
	if res.Dir != "" {
		defer os.RemoveAll(res.Dir)
	}
	if len(res.Results) != 1 || res.Results[0].Case.ID != "beforegraphapplied-crash" {
		var ids []string
		for _, r := range res.Results {
			ids = append(ids, r.Case.ID)
		}
		t.Fatalf("ran %v, want only beforegraphapplied-crash", ids)
	}
}

// An id that names no case of the run is an error naming it, not a run of
// nothing ("no case matches points [] kinds [] classes []" named neither
// the variable nor the id). The run is a child go test, whose failure is
// the point.
func TestCrashMatrixNamesAnUnknownCaseID(t *testing.T) {
	const child = "CRASHMATRIX_TEST_UNKNOWN_CASE_CHILD"
	if os.Getenv(child) != "" {
		crashrun.Run(t, embedded.Memory(), crashrun.Options{Points: []faults.Point{faults.BeforeGraphApplied}})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashMatrixNamesAnUnknownCaseID$", "-test.count=1")
	cmd.Env = append(os.Environ(), child+"=1", crashrun.CaseFilterEnv+"=beforegraphapplied-crash,no-such-case")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "CRASHMATRIX_CASE=beforegraphapplied-crash,no-such-case: no case has the id no-such-case") {
		t.Fatalf("an unknown case id: err %v, output:\n%s", err, out)
	}
}

// RandomKills with a point filter would run none of them and certify
// without saying so (a store author saw it): it is an error naming why.
func TestRandomKillsLeftOutByAFilterIsAnError(t *testing.T) {
	const child = "CRASHMATRIX_TEST_RANDOM_KILLS_CHILD"
	if os.Getenv(child) != "" {
		properties.CertifyCrashSafety(t, embedded.Memory(), properties.CrashOptions{Points: []faults.Point{faults.BeforeGraphApplied}, RandomKills: 20})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRandomKillsLeftOutByAFilterIsAnError$", "-test.count=1")
	cmd.Env = append(os.Environ(), child+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "RandomKills: 20 random kills asked for with a point or kind filter") {
		t.Fatalf("random kills with a point filter: err %v, output:\n%s", err, out)
	}
}

// Every mutant of the catalogue, the realistic service bugs included, is
// caught by the invariant that names its defect, in the in-process mode:
// by its slice of the crash matrix (certify), or by the explorer within a
// fixed seed and schedule budget. "Not exercised" never counts.
func TestEveryMutantCaughtInProcess(t *testing.T) {
	listed := map[string]bool{}
	for _, m := range crashrun.Mutants() {
		listed[m.Name] = true
	}
	for _, b := range reference.Bugs {
		if !listed[string(b)] {
			t.Errorf("bug %s is not in the mutant catalogue (crashrun.Mutants)", b)
		}
	}
	for _, m := range crashrun.Mutants() {
		t.Run(m.Name, func(t *testing.T) {
			r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), InProcess: true,
				Bugs: m.Options.Bugs, Mutant: m.Options.Mutant, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer r.CloseShared()
			if m.Explore != nil {
				res := explore.Run(context.Background(), r, explore.Options{Seed: m.Explore.Seed, MaxSchedules: m.Explore.MaxSchedules, Parallel: 2, Target: m.Invariant, Confirm: 1})
				if res.Finding == nil {
					t.Fatalf("explore, seed %d, %d schedules: no %s violation", m.Explore.Seed, res.Schedules, m.Invariant)
				}
				t.Logf("explore seed %d: %s in schedule %d: %v", m.Explore.Seed, m.Invariant, res.Finding.Index, res.Finding.Result.Violations[0])
				return
			}
			lease := catalogue.Lease(r.Config().LeaseTTL)
			// The probe counts the stale holder's store calls, which the
			// between-calls cases sweep (a mutant that breaks even without
			// faults fails the probe: it needs no such count).
			var probe verdict.Probe
			if slices.Contains(m.Options.Classes, catalogue.BetweenCallsClass) {
				var err error
				if probe, err = r.Probe(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			cases := catalogue.Selection{Points: m.Options.Points, Kinds: m.Options.Kinds, Classes: m.Options.Classes}.Cases(probe.Probe, lease, 1)
			if len(cases) == 0 {
				t.Fatalf("no case matches the mutant's slice %+v", m.Options)
			}
			rep := r.RunAll(context.Background(), cases, 2, nil)
			if rep.ExitCode != 1 || !slices.Contains(rep.Broken(), m.Invariant) {
				t.Fatalf("certify slice %v: exit %d, broke %v; want exit 1 and %s", caseIDs(cases), rep.ExitCode, rep.Broken(), m.Invariant)
			}
			for _, res := range rep.Results {
				for _, v := range res.Violations {
					if v.Invariant.Short() == m.Invariant {
						t.Logf("%s: %s", res.Case.ID, v)
						return
					}
				}
			}
		})
	}
}

func caseIDs(cs []catalogue.Case) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// The matrix re-executes the test binary as its workers, so what a test
// does before CertifyCrashSafety (a t.TempDir for its store) runs in every
// worker too, and most workers die by SIGKILL, cleaning nothing up. What
// they leave in the temporary directory goes with the run's folder.
func TestWorkersLeaveNothingInTheTemporaryDirectory(t *testing.T) {
	outer := t.TempDir()
	t.Setenv("TMPDIR", outer)
	mine, err := os.MkdirTemp("", "store-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(mine)
	res := crashrun.Run(t, embedded.SQLite(), crashrun.Options{Points: []faults.Point{faults.BeforeGraphApplied, faults.BeforeStateCommit}, Kinds: []faults.Kind{faults.Crash}})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d:\n%s", res.ExitCode, crashrun.Describe("sqlite", res))
	}
	if !strings.HasPrefix(mine, outer) {
		t.Fatalf("the test's own folder %s is not under TMPDIR %s", mine, outer)
	}
	left, err := os.ReadDir(outer)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if want := filepath.Base(mine); len(names) != 1 || names[0] != want {
		t.Fatalf("the temporary directory holds %v after the run, want only this test's own %s", names, want)
	}
}

// The exploration after the matrix (in-process, seeded) catches what the
// chosen part of the matrix misses: the run fails with the shrunk
// schedule as a case of its own, its scenario in the run's folder, and
// the test's own command to find it again.
func TestCrashRunExploresAfterTheMatrix(t *testing.T) {
	res := crashrun.Run(t, embedded.SQLite(), crashrun.Options{Points: []faults.Point{faults.BeforeCompleted}, Kinds: []faults.Kind{faults.Crash},
		Bugs: []reference.Bug{reference.BugDeadLetterWithoutReconcile}, Seed: 4, Explore: 20})
	i := slices.IndexFunc(res.Results, func(r verdict.CaseResult) bool { return r.Case.Class == explorerun.Class })
	if res.ExitCode != 1 || i < 0 || res.Counts[verdict.Pass] != 1 {
		t.Fatalf("exit %d, %v, exploration %q; want the matrix's one case to pass and exploration to fail the run\n%s", res.ExitCode, res.Counts, res.Exploration, crashrun.Describe("sqlite", res))
	}
	found := res.Results[i]
	if !slices.Contains(found.Broken(), "I3") || !strings.HasPrefix(res.Exploration, "exploration: schedule 0 of 20 schedules of seed 4 (in-process) broke I3") {
		t.Errorf("the finding broke %v: %s", found.Broken(), res.Exploration)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, found.Case.ID+".yaml")); err != nil {
		t.Errorf("its scenario: %v", err)
	}
	if got := res.Options.Replay(found); got != res.Options.Rerun {
		t.Errorf("its replay %q, want the test's own rerun %q", got, res.Options.Rerun)
	}
}
