package properties_test

import (
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
)

// Under go test -v, CertifyCrashSafety logs its progress as it goes (a
// line at each tenth of the run: cases done of the total, failures so far,
// time elapsed), so that a CI log shows a long run going on. The run is a
// child go test -v.
func TestCertifyCrashSafetyLogsProgressUnderVerbose(t *testing.T) {
	const child = "CRASHMATRIX_TEST_PROGRESS_CHILD"
	if os.Getenv(child) != "" {
		properties.CertifyCrashSafety(t, embedded.SQLite(), properties.CrashOptions{Points: []faults.Point{faults.BeforeGraphApplied, faults.BeforeCompleted},
			Kinds: []faults.Kind{faults.Crash, faults.Transient}})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCertifyCrashSafetyLogsProgressUnderVerbose$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), child+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child run failed: %v\n%s", err, out)
	}
	// 4 cases: a line at each.
	lines := regexp.MustCompile(`(?m)^\s+\S+\.go:\d+: crash matrix: (\d)/4 cases \(\d+%\), 0 failed, \d+s elapsed$`).FindAllStringSubmatch(string(out), -1)
	if len(lines) != 4 || lines[0][1] != "1" || lines[3][1] != "4" {
		t.Fatalf("want a progress line at each of the 4 cases, got %d:\n%s", len(lines), out)
	}
}
