package bench

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// The worker-start profile reads GODEBUG=inittrace=1 from the started
// binary: this test binary's packages are listed, the largest first; a
// program that prints no trace gives none.
func TestWorkerInitProfile(t *testing.T) {
	got := workerInitProfile(func() *exec.Cmd { return exec.Command(os.Args[0], "-test.run=^$") }, 3)
	if !regexp.MustCompile(`3 starts\): median [0-9.]+[µm]?s of wall clock over [0-9]{2,} packages, most in \S+ [0-9.]+[µm]?s \([0-9]+ bytes\)`).MatchString(got) {
		t.Errorf("profile of the test binary: %q", got)
	}
	if got := workerInitProfile(func() *exec.Cmd { return exec.Command("true") }, 2); got != "" {
		t.Errorf("a program without a trace: %q, want none", got)
	}
}
