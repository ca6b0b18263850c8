package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/certifyrun"
)

// nsStore is the command line of testdata/stores/nsstore.py around the
// Python example store script (examples/python): the store keeps its data
// in shared/ns-<namespace>, whatever hello's dir, and records what each of
// its processes was started with in shared/started.
func nsStore(t *testing.T, shared, script string) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("python3 is needed to run the example stores: %v", err)
	}
	py := strings.TrimSpace(string(out)) + " -S "
	return py + filepath.Join(rootDir(), "cmd", "crashmatrix", "testdata", "stores", "nsstore.py") + " " + shared + " " +
		py + filepath.Join(rootDir(), "examples", "python", script)
}

// The conformance suites run a store as the matrix does: each bundle gets
// a namespace of its own in hello, which the spec tells a store on a
// server to scope its keys by. A store that keeps every bundle's data in
// one place, scoped by namespace, passes them; when every bundle's hello
// carried namespace "", it failed 56 checks ("first create returned
// false", "State CAS: 0 winners").
func TestConformanceGivesEachBundleItsNamespace(t *testing.T) {
	shared := t.TempDir()
	s := storeCmdFlags{command: nsStore(t, shared, "sqlite_store.py"), planSave: nsStore(t, shared, "plansave_store.py"), conformance: true,
		conformanceRun: "^(Stores|PlanSave)$/^(Behaviour|PlanStore)$"}
	var out bytes.Buffer
	code, done, err := certifyrun.RunConformance(context.Background(), s.conformanceOptions(), true, &out)
	if code != 0 || !done || err != nil {
		t.Fatalf("conformance on a store that scopes its data by namespace: exit %d (done %v), %v, want a pass (exit 0):\n%s", code, done, err, out.String())
	}
	spaces, _ := filepath.Glob(filepath.Join(shared, "ns-*"))
	if len(spaces) < 10 {
		t.Fatalf("the store saw %d namespaces (%v), want one per bundle:\n%s", len(spaces), spaces, out.String())
	}
	for _, sp := range spaces {
		if filepath.Base(sp) == "ns-" {
			t.Errorf("a bundle's hello carried namespace \"\"")
		}
	}
	sameStart(t, shared, "")
}

// Every process of a store gets the same environment, whichever process
// of the harness starts it (a worker's, the supervisor's snapshot, a
// conformance bundle's): $TMPDIR the run's store-tmp folder, none of the
// variables the harness sets for its own workers (GO_FAILPOINTS,
// GOTRACEBACK, TMPDIR=<case>/tmp), and the directory certify ran in.
func TestEveryStoreProcessGetsTheSameEnvironment(t *testing.T) {
	shared, work := t.TempDir(), t.TempDir()
	store := nsStore(t, shared, "sqlite_store.py")
	var out bytes.Buffer
	cmd := certifyCmd()
	cmd.SetArgs([]string{"--quiet", "--conformance=false", "--store-cmd", store, "--point", "beforeStateCommit", "--kind", "crash", "--workdir", work})
	cmd.SetOut(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err != nil {
		t.Fatalf("certify: %v\n%s", err, out.String())
	}
	sameStart(t, shared, filepath.Join(work, "store-tmp"))
}

// sameStart fails t unless every store process nsstore.py recorded in
// shared ran in this directory with one environment (but for its case's
// $CRASHMATRIX_STORE_DIR): $TMPDIR tmp (any one folder if tmp is ""), and
// none of the variables the harness sets for its own workers.
func sameStart(t *testing.T, shared, tmp string) {
	t.Helper()
	started, _ := filepath.Glob(filepath.Join(shared, "started", "*.json"))
	if len(started) < 3 {
		t.Fatalf("%d store processes recorded, want more", len(started))
	}
	wd, _ := os.Getwd()
	var first map[string]string
	for _, f := range started {
		var p struct {
			Cwd string
			Env map[string]string
		}
		b, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(b, &p) != nil {
			t.Fatalf("%s: %v %s", f, err, b)
		}
		if p.Cwd != wd {
			t.Errorf("store process %s ran in %s, want certify's directory %s", filepath.Base(f), p.Cwd, wd)
		}
		if got := p.Env["TMPDIR"]; got == "" || tmp != "" && got != tmp {
			t.Errorf("store process %s: TMPDIR=%q, want %q", filepath.Base(f), got, tmp)
		}
		for _, k := range []string{"GO_FAILPOINTS", "GOTRACEBACK", "CRASHMATRIX_WORKER_SPEC", "CRASHMATRIX_CONFORMANCE_RUN"} {
			if v, ok := p.Env[k]; ok {
				t.Errorf("store process %s has the harness's %s=%s", filepath.Base(f), k, v)
			}
		}
		if first == nil {
			first = p.Env
			continue
		}
		for k, v := range p.Env {
			if k != "CRASHMATRIX_STORE_DIR" && first[k] != v { // the case's folder
				t.Errorf("store process %s: %s=%q, another had %q", filepath.Base(f), k, v, first[k])
			}
		}
		for k := range first {
			if _, ok := p.Env[k]; !ok {
				t.Errorf("store process %s lacks %s, which another had", filepath.Base(f), k)
			}
		}
	}
}
