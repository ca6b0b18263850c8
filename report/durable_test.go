package report

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// durableReport is a sweep of two cases: a kill after ops.create's first
// sync that broke I5, and a power cut after states.cas's second whose
// call never reached it (not exercised).
func durableReport() verdict.Report {
	fail := catalogue.DurableStepCase(catalogue.DurableKill{Call: 8, Method: "ops.create", Hit: 1, Step: 1, Steps: 2, Op: "fdatasync"})
	nx := catalogue.DurableStepCase(catalogue.DurableKill{Call: 20, Method: "states.cas", Hit: 1, Step: 2, Steps: 3, Op: "fsync", Power: true})
	torn := catalogue.DurableStepCase(catalogue.DurableKill{Call: 8, Method: "ops.create", Hit: 1, Step: 1, Steps: 2, Op: "fdatasync", Power: true, Tear: 512})
	return verdict.Report{Backend: "store-cmd", Counts: map[verdict.Verdict]int{verdict.Fail: 2, verdict.NotExercised: 1}, Probed: true, DurableCalls: 54, DurableMulti: 5,
		Results: []verdict.CaseResult{
			{Case: fail, Verdict: verdict.Fail, Violations: []check.Violation{{Invariant: check.I5, Message: "the operation record is stored without its plan"}}},
			{Case: torn, Verdict: verdict.Fail, Violations: []check.Violation{{Invariant: check.I5, Message: "the operation record is stored without its plan"}}},
			{Case: nx, Verdict: verdict.NotExercised, NotExercised: &verdict.NotExercisedReason{Cause: verdict.CauseUnreachable, Detail: "durable-step kill of worker fault never fired"}},
		}}
}

// The terminal report lists the durable-step sweep by call and step, with
// what the probe counted; a case whose step was not reached is not
// exercised, never a pass; a report with no durable probe says nothing of
// it.
func TestTerminalListsTheDurableStepSweep(t *testing.T) {
	var b strings.Builder
	WriteTerminal(&b, durableReport(), Options{})
	for _, want := range []string{
		"durable steps (found on the lazy mount, not declared): 54 store calls of the probe synced, 5 of them more than once; 3 cases",
		"  ops.create after fdatasync 1 of 2        FAIL I5",
		"  ops.create after fdatasync 1 of 2, torn write (512) FAIL I5",
		"  states.cas after fsync 2 of 3, power loss not-exercised",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report has no line %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "states.cas after fsync 2 of 3, power loss pass") {
		t.Errorf("the step not reached reads as a pass:\n%s", b.String())
	}
	b.Reset()
	WriteTerminal(&b, verdict.Report{Backend: "sqlite", Counts: map[verdict.Verdict]int{}, Probed: true}, Options{})
	if strings.Contains(b.String(), "durable steps") {
		t.Errorf("a report without a durable probe speaks of durable steps:\n%s", b.String())
	}
}

// The HTML report has the same rows, each linked to its case, the one not
// reached marked not exercised.
func TestHTMLListsTheDurableStepSweep(t *testing.T) {
	var b strings.Builder
	if err := WriteHTML(&b, durableReport(), Options{}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		"<h2>Durable steps</h2>",
		"54 store calls of the probe synced, 5 of them more than once",
		`<tr><th>ops.create after fdatasync 1 of 2</th><td class="fail"`,
		`<a href="#durable-step-ops.create-1-of-2">FAIL I5</a>`,
		`<tr><th>states.cas after fsync 2 of 3, power loss</th><td class="nx"`,
		">not-exercised</a>",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the HTML report has no %q", want)
		}
	}
	b.Reset()
	if err := WriteHTML(&b, verdict.Report{Backend: "sqlite", Counts: map[verdict.Verdict]int{}, Probed: true}, Options{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Durable steps") {
		t.Error("an HTML report without a durable probe speaks of durable steps")
	}
}
