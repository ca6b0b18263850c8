package properties

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
)

// ExpectBroken takes short and full invariant names, in any case, once
// each, over every option given; an unknown one is an error naming the
// field.
func TestExpectBrokenNames(t *testing.T) {
	_, expect, err := crashOptions([]CrashOptions{{ExpectBroken: []string{"I7", "i7"}}, {ExpectBroken: []string{"I3 convergent graph", "I7 leases"}}})
	if err != nil || !slices.Equal(expect, []string{"I7", "I3"}) {
		t.Errorf("expect %v, err %v; want [I7 I3]", expect, err)
	}
	if _, _, err := crashOptions([]CrashOptions{{ExpectBroken: []string{"I10"}}}); err == nil || !strings.Contains(err.Error(), "CrashOptions.ExpectBroken") || !strings.Contains(err.Error(), "I10") {
		t.Errorf("unknown invariant: %v, want an error naming CrashOptions.ExpectBroken and I10", err)
	}
	if m := unbroken([]string{"I7", "I3"}, []string{"I5", "I7"}); !slices.Equal(m, []string{"I3"}) {
		t.Errorf("unbroken = %v, want [I3]", m)
	}
}

// expectMissEnv makes TestNegativeControlThatMissesFails run the negative
// control that must fail (in a child go test).
const expectMissEnv = "CRASHMATRIX_TEST_EXPECT_MISS"

// A negative control whose invariant does not break fails its test, and
// says what broke instead: here the correct SQLite backend, expected to
// break I7. The control runs in a child go test, whose failure is the
// point.
func TestNegativeControlThatMissesFails(t *testing.T) {
	if os.Getenv(expectMissEnv) != "" {
		CertifyCrashSafety(t, embedded.SQLite(), CrashOptions{Points: []faults.Point{faults.BeforeGraphApplied}, Kinds: []faults.Kind{faults.Crash},
			ExpectBroken: []string{"I7"}})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNegativeControlThatMissesFails$", "-test.count=1")
	cmd.Env = append(os.Environ(), expectMissEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the negative control passed although nothing broke:\n%s", out)
	}
	if !strings.Contains(string(out), "was expected to break [I7]; it broke [], not [I7]") {
		t.Errorf("the failure does not say what was expected and what broke:\n%s", out)
	}
}
