package report

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The terminal report lists the durable-step sweep by call and step, with
// what the probe counted; a report with no durable probe says nothing of it.
func TestTerminalListsTheDurableStepSweep(t *testing.T) {
	c := catalogue.DurableStepCase(catalogue.DurableKill{Call: 8, Method: "ops.create", Step: 1, Steps: 2, Op: "fdatasync"})
	rep := verdict.Report{Backend: "store-cmd", Counts: map[verdict.Verdict]int{verdict.Fail: 1}, Probed: true, DurableCalls: 54, DurableMulti: 5,
		Results: []verdict.CaseResult{{Case: c, Verdict: verdict.Fail, Violations: []check.Violation{{Invariant: check.I5, Message: "the operation record is stored without its plan"}}}}}
	var b strings.Builder
	WriteTerminal(&b, rep, Options{})
	for _, want := range []string{
		"durable steps (found on the lazy mount, not declared): 54 store calls of the probe synced, 5 of them more than once; 1 case",
		"  ops.create after fdatasync 1 of 2        FAIL I5",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report has no line %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	WriteTerminal(&b, verdict.Report{Backend: "sqlite", Counts: map[verdict.Verdict]int{}, Probed: true}, Options{})
	if strings.Contains(b.String(), "durable steps") {
		t.Errorf("a report without a durable probe speaks of durable steps:\n%s", b.String())
	}
}
