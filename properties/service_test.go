package properties_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/sim"
)

// serviceGo builds examples/service-go (crashmatrix's reference behind
// the service protocol) and returns its command line. In a worker process
// of the run (a re-execution of this test) it builds nothing: the worker
// takes the command from its spec (what it is given here goes unused).
func serviceGo(t *testing.T) string {
	t.Helper()
	if os.Getenv(sim.WorkerSpecEnv) != "" {
		return "service-go (built by the test's process)"
	}
	bin := filepath.Join(t.TempDir(), "service-go")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/service-go").CombinedOutput(); err != nil {
		t.Fatalf("building examples/service-go: %v\n%s", err, out)
	}
	return bin
}

// TestExampleServiceRuns: CertifyCrashSafety with CrashOptions.Service
// certifies the correct service, run through the service protocol (the
// report names the service, not the backend alone).
func TestExampleServiceRuns(t *testing.T) {
	rep := testServiceSurvivesKills(t, serviceGo(t))
	if !strings.HasPrefix(rep.Backend, "service crashmatrix-reference") || rep.Counts["pass"] == 0 {
		t.Errorf("report of backend %q, counts %v; want the service's passing cases", rep.Backend, rep.Counts)
	}
}

// TestBrokenServiceFails: the service's broken variant (the model called
// again on resume) breaks I1, which the negative control names; the run
// went through the service.
func TestBrokenServiceFails(t *testing.T) {
	rep := testServiceSurvivesKills(t, serviceGo(t), properties.CrashOptions{ServiceBugs: []string{"recall-model-on-resume"}, ExpectBroken: []string{"I1"}})
	if !strings.HasPrefix(rep.Backend, "service crashmatrix-reference") || strings.Join(rep.Broken(), ",") != "I1" || strings.Join(rep.Bugs, ",") != "recall-model-on-resume" {
		t.Errorf("report of backend %q, bugs %v, broke %v; want the service's variant breaking I1 alone", rep.Backend, rep.Bugs, rep.Broken())
	}
}
