package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestConformanceReusesReopenedStoreProcesses: the Python example store
// declares reopen, so certify's conformance bundles are served by a few
// store processes, each bundle's client greeting one its predecessor
// closed on the bundle's own folder; the same store without reopen gets a
// process per bundle. The starts are counted by the store command itself
// (a shell that appends a line before it execs Python), and the summary
// says how long they took.
func TestConformanceReusesReopenedStoreProcesses(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to run the Python example store: %v", err)
	}
	store := filepath.Join(rootDir(), "examples", "python", "sqlite_store.py")
	bundlesRe := regexp.MustCompile(`\((\d+) store bundles, [^;]+; store starts: median \S+, max \S+ over (\d+) process(es)?\)`)
	run := func(t *testing.T, extra string) (bundles, starts, reported int) {
		count := filepath.Join(t.TempDir(), "starts")
		cmd := "sh -c " + shellQuote("echo start >> "+shellQuote(count)+"; exec "+py+" -S "+shellQuote(store)+extra)
		// The operation store's suite: many bundles, none concurrent.
		out, code := execute(t, certifyCmd(), "--store-cmd", cmd, "--conformance-run", "^Stores$/^OperationStore$", "--workdir", t.TempDir())
		if code != 0 {
			t.Fatalf("exit %d, want 0:\n%s", code, out)
		}
		m := bundlesRe.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no bundle count and store starts in the output:\n%s", out)
		}
		b, err := os.ReadFile(count)
		if err != nil {
			t.Fatal(err)
		}
		bundles, _ = strconv.Atoi(m[1])
		reported, _ = strconv.Atoi(m[2])
		return bundles, strings.Count(string(b), "start\n"), reported
	}
	t.Run("reopen", func(t *testing.T) {
		bundles, starts, reported := run(t, "")
		if bundles < 10 {
			t.Fatalf("%d bundles: the pattern should select many", bundles)
		}
		// The probe bundle the suite keeps open throughout, a process
		// passed from bundle to bundle (a model-based check's runs one
		// after the other), and those of the cases that hold several
		// bundles open at once (71 bundles, 10 starts here).
		if starts > bundles/5 {
			t.Errorf("%d store processes started for %d bundles, want at most a fifth: the bundles did not reuse the reopened processes", starts, bundles)
		}
		if reported != starts {
			t.Errorf("the summary says %d store starts, the store command counted %d", reported, starts)
		}
	})
	t.Run("no-reopen", func(t *testing.T) {
		bundles, starts, reported := run(t, " --no-reopen")
		if starts != bundles {
			t.Errorf("a store that does not declare reopen: %d store processes started for %d bundles, want one per bundle", starts, bundles)
		}
		if reported != starts {
			t.Errorf("the summary says %d store starts, the store command counted %d", reported, starts)
		}
	})
}
