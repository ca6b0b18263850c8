package storecmd_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/storecmd"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// TestMain turns the test binary into a worker when the supervisor
// re-executes it (sim.ReexecLauncher).
func TestMain(m *testing.M) {
	if path := os.Getenv(sim.WorkerSpecEnv); path != "" {
		os.Exit(sim.WorkerMain("worker", []string{"--spec", path}))
	}
	os.Exit(m.Run())
}

// pythonStore is the command line that runs script (a path from this
// package's folder) with python3, without the site module.
func pythonStore(t *testing.T, script string, args ...string) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("python3 is needed to run the example stores: %v", err)
	}
	abs, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(append([]string{strings.TrimSpace(string(out)), "-S", abs}, args...), " ")
}

// storeLogs lists the store processes' logs (store-<pid>.log) under a
// case's folder, relative to it.
func storeLogs(t *testing.T, caseDir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(caseDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), "store-") && strings.HasSuffix(d.Name(), ".log") {
			rel, _ := filepath.Rel(caseDir, path)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A store over the store protocol that keeps its database outside the
// folder hello names, and never syncs, is out of reach of the power loss:
// its power-loss and torn-write cases are not exercised (data-elsewhere),
// and the run is not certified. Before, the harness wrote each store
// process's log (store-<pid>.log) into that folder itself: the lazy mount
// saw those files, the power loss "lost" log lines, and the column
// certified. The example store with its data in the folder is still
// exercised and passes. The logs are written, in the case's folder, never
// in the store's.
func TestPowerLossOnStoreCmdDataElsewhere(t *testing.T) {
	if err := lazyfs.Available(); err != nil {
		// make test runs as root where FUSE works: a skip would pass
		// the proof with nothing tested.
		t.Fatal(sim.PowerLossNotTested(err.Error()))
	}
	cases := func() []catalogue.Case {
		var out []catalogue.Case
		for _, k := range []faults.Kind{faults.PowerLoss, faults.TornWrite} {
			c, ok := catalogue.Lease(250*time.Millisecond).PowerCase(faults.BeforeCompleted, k)
			if !ok {
				t.Fatalf("no %s case at %s", k, faults.BeforeCompleted)
			}
			out = append(out, c)
		}
		return out
	}
	run := func(command string) verdict.Report {
		t.Helper()
		r, err := sim.NewRunner(sim.Config{Backend: storecmd.Spec(command, "", "", 0), WorkDir: t.TempDir(), Seed: 1,
			Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}})
		if err != nil {
			t.Fatal(err)
		}
		defer r.CloseShared()
		return r.RunAll(context.Background(), cases(), 2, nil)
	}
	logsOutsideData := func(res verdict.CaseResult) {
		t.Helper()
		logs := storeLogs(t, res.Dir)
		if len(logs) == 0 {
			t.Errorf("%s: no store log in the case's folder %s", res.Case.ID, res.Dir)
		}
		for _, l := range logs {
			if slices.Contains(strings.Split(filepath.ToSlash(l), "/"), "data") {
				t.Errorf("%s: the harness wrote the store's log %s into the store's data folder", res.Case.ID, l)
			}
			// Where the reports point the user.
			if where := res.StoreLogs(); where == "" || filepath.Dir(filepath.Join(res.Dir, l)) != where {
				t.Errorf("%s: the store's log %s is not in the folder the reports name (%q)", res.Case.ID, l, where)
			}
		}
	}

	t.Run("elsewhere", func(t *testing.T) {
		rep := run(pythonStore(t, "testdata/elsewhere_store.py", filepath.Join(t.TempDir(), "elsewhere")))
		if rep.Verdict == verdict.Pass {
			t.Errorf("a store whose data is off the lazy mount was certified under power loss")
		}
		for _, res := range rep.Results {
			if res.Verdict != verdict.NotExercised || res.NotExercised == nil || res.NotExercised.Cause != verdict.CauseDataElsewhere {
				t.Errorf("%s on a store whose data is off the mount: %s %+v, notes %q, lost %q; want not exercised (%s)",
					res.Case.ID, res.Verdict, res.NotExercised, res.Notes, res.PowerLost, verdict.CauseDataElsewhere)
			}
			logsOutsideData(res)
		}
	})
	t.Run("inside", func(t *testing.T) {
		rep := run(pythonStore(t, "../../examples/python/sqlite_store.py"))
		for _, res := range rep.Results {
			if res.NotExercised != nil && res.NotExercised.Cause == verdict.CauseDataElsewhere {
				t.Errorf("%s on the example store, its data in its folder: not exercised (%s)", res.Case.ID, res.NotExercised.Detail)
			}
			if res.Case.Kind == faults.PowerLoss && res.Verdict != verdict.Pass {
				t.Errorf("%s on the example store, its data in its folder: %s %v %v; want pass", res.Case.ID, res.Verdict, res.Notes, res.Violations)
			}
			logsOutsideData(res)
		}
	})
	ms, err := lazyfs.Mounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.PID == os.Getpid() {
			t.Errorf("lazy mount left behind: %s", m.Dir)
		}
	}
}
