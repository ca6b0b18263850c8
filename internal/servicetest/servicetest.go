// Package servicetest runs a team's service, a command that speaks the
// service protocol (docs/service-protocol.md), under the crash matrix from
// a Go test: what the example services' tests (examples/service-java,
// examples/service-python) share. The harness's stores are the embedded
// SQLite backend; the test binary is re-executed as each case's worker.
package servicetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	_ "github.com/crashmatrix/crashmatrix/sim/embedded" // the harness's stores: sqlite
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Main is the test binary's TestMain: a crashmatrix worker when the
// supervisor re-executes it, the tests otherwise.
func Main(m *testing.M) {
	if path := os.Getenv(sim.WorkerSpecEnv); path != "" {
		os.Exit(sim.WorkerMain("worker", []string{"--spec", path}))
	}
	os.Exit(m.Run())
}

// Runner runs cases on the service command, started in dir, with the
// broken variants bugs passed on in hello (as --bug does).
func Runner(t testing.TB, command, dir string, bugs ...string) *sim.Runner {
	t.Helper()
	cfg := sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1,
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"},
		Service:  &sim.ServiceSpec{Command: command, WorkDir: dir}}
	for _, b := range bugs {
		cfg.Bugs = append(cfg.Bugs, reference.Bug(b))
	}
	r, err := sim.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Run runs the matrix's cases at points with kinds, two at a time, less
// those the service's declarations leave out (logged), and fails the test
// unless every case gave a result.
func Run(t testing.TB, r *sim.Runner, points []faults.Point, kinds ...faults.Kind) verdict.Report {
	t.Helper()
	cases := catalogue.Selection{Points: points, Kinds: kinds}.Cases(catalogue.Probe{}, catalogue.Lease(r.Config().LeaseTTL), 1)
	cases, left := r.ServiceCases(cases)
	if len(left) > 0 {
		t.Logf("left out: %v", left)
	}
	if len(cases) == 0 {
		t.Fatalf("no cases for %v %v", points, kinds)
	}
	start := time.Now()
	rep := r.RunAll(context.Background(), cases, 2, nil)
	t.Logf("%d cases in %s", len(rep.Results), time.Since(start).Round(time.Millisecond))
	if len(rep.Results) != len(cases) {
		for _, res := range rep.Results {
			t.Logf("%s: %s %v %v %v", res.Case.ID, res.Verdict, res.Violations, res.Notes, res.NotExercised)
			for _, w := range res.Workers {
				t.Logf("  worker %+v", w)
			}
		}
		t.Fatalf("%d results of %d cases (exit %d)", len(rep.Results), len(cases), rep.ExitCode)
	}
	return rep
}

// Passed fails the test for every case that did not pass, or passed
// without its fault firing (not-applicable cases are allowed when
// allowNA), and for a report that does not certify.
func Passed(t testing.TB, rep verdict.Report, allowNA bool) {
	t.Helper()
	for _, res := range rep.Results {
		if res.Verdict == verdict.NotApplicable && allowNA {
			continue
		}
		if res.Verdict != verdict.Pass {
			t.Errorf("%s: %s %v %v %v", res.Case.ID, res.Verdict, res.Violations, res.Notes, res.NotExercised)
		} else if len(res.Hits) == 0 {
			t.Errorf("%s: passed without a fault firing", res.Case.ID)
		}
	}
	if rep.ExitCode != 0 {
		t.Fatalf("exit %d", rep.ExitCode)
	}
}

// CLICase is one certify command line of a guide: the flags after the
// common ones, the exit code it must give and a text its output must hold.
type CLICase struct {
	Name string
	Args []string
	Exit int
	Want string
}

// CertifyCLI builds the crashmatrix binary (root is the module's folder)
// and runs `crashmatrix certify --service-cmd service` with common and each
// case's flags in dir, as a team runs it from a guide, logging each run's
// output and time.
func CertifyCLI(t *testing.T, root, dir, service string, common []string, cases []CLICase) {
	t.Helper()
	bin := BuildCLI(t, root)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			args := append(append([]string{"certify", "--workdir", t.TempDir(), "--service-cmd", service}, common...), c.Args...)
			cmd := exec.Command(bin, args...)
			cmd.Dir = dir
			start := time.Now()
			out, err := cmd.CombinedOutput()
			t.Logf("crashmatrix %s (%s):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Second), out)
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.Exit || !strings.Contains(string(out), c.Want) {
				t.Errorf("exit %d, want %d with %q", code, c.Exit, c.Want)
			}
			if c.Exit == 0 && strings.Contains(string(out), "NOT CERTIFIED") {
				t.Errorf("the correct service was not certified")
			}
		})
	}
}

// Here is the folder of the calling test's source file: the example's
// folder, where its service command runs.
func Here() string {
	_, file, _, _ := runtime.Caller(1)
	return filepath.Dir(file)
}

// BuildCLI builds the crashmatrix binary of the module in root into a
// temporary folder and returns its path.
func BuildCLI(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "crashmatrix")
	build := exec.Command("go", "build", "-o", bin, "./cmd/crashmatrix")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
