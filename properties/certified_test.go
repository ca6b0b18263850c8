package properties

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// A run certified without power loss says so in the line the test logs.
func TestCertifiedLineSaysWhatWasNotTested(t *testing.T) {
	rep := verdict.Report{Counts: map[verdict.Verdict]int{verdict.Pass: 3}, PowerLoss: sim.PowerLossNotTested("no /dev/fuse")}
	if got := certified("mine", rep); !strings.Contains(got, "certified: 3 cases pass") || !strings.HasSuffix(got, "; power loss: not tested (no /dev/fuse)") {
		t.Fatalf("the certified line: %q", got)
	}
	// A run that tested power loss says so, with how many cases; a subset
	// says it is one (before, both lines read as the plain one).
	rep.PowerLoss = ""
	rep.Results = []verdict.CaseResult{{Case: catalogue.Case{Kind: faults.PowerLoss}, Verdict: verdict.Pass}, {Case: catalogue.Case{Kind: faults.Crash}, Verdict: verdict.Pass}}
	if got := certified("mine", rep); strings.Contains(got, "not tested") || !strings.HasSuffix(got, "; power loss: tested (1 of the cases)") {
		t.Fatalf("a run that tested power loss: %q", got)
	}
	rep.Subset = "--class entity-race"
	rep.Results = rep.Results[1:]
	if got := certified("mine", rep); !strings.Contains(got, "certified (a subset, --class entity-race; not the whole matrix): 3 cases pass") ||
		!strings.HasSuffix(got, "; power loss: no case of this run") {
		t.Fatalf("a subset without power loss: %q", got)
	}
}
