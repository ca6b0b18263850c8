package properties

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/sim"
)

// A run certified without power loss says so in the line the test logs.
func TestCertifiedLineSaysWhatWasNotTested(t *testing.T) {
	rep := sim.Report{Counts: map[sim.Verdict]int{sim.Pass: 3}, PowerLoss: sim.PowerLossNotTested("no /dev/fuse")}
	if got := certified("mine", rep); !strings.Contains(got, "certified: 3 cases pass") || !strings.HasSuffix(got, "; power loss: not tested (no /dev/fuse)") {
		t.Fatalf("the certified line: %q", got)
	}
	rep.PowerLoss = ""
	if got := certified("mine", rep); strings.Contains(got, "power loss") {
		t.Fatalf("a run that tested power loss says otherwise: %q", got)
	}
}
