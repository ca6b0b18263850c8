package report

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// unsyncedCase is a power-loss case on a store that skips its fsync: the
// power loss at window p undid every write the store had acknowledged
// before it, and the checker's own I9 and I5 say so (with the window's
// writes: the later the window, the more of them). It is what one defect
// looks like at each window: a different record lost first.
func unsyncedCase(p faults.Point, writes int) verdict.CaseResult {
	op, doc := fmt.Sprintf("ingest-%032x", writes*0x1ed5565f), "d1"
	events := []reference.Event{
		{Kind: reference.EvPrepared, OperationID: op, DocumentID: doc, Holder: "fault/10#1", At: 1},
		{Kind: reference.EvStage, OperationID: op, DocumentID: doc, From: reference.Prepared, To: reference.GraphApplied, Holder: "fault/10#1", At: 2},
		{Kind: reference.EvStateCommit, OperationID: op, DocumentID: doc, Revision: 1, Holder: "fault/10#1", At: 3},
		{Kind: reference.EvVersion, OperationID: op, DocumentID: doc, Revision: 1, Holder: "fault/10#1", At: 4},
	}[:writes]
	o := check.Observed{Events: events, Prepared: map[string][]string{op: {"fp"}}, Quiet: true,
		Restarts: []check.Restart{{Server: "machine (power loss)", Point: string(p), Worker: "fault", Events: len(events)}}}
	var empty check.Snapshot
	vs := append(check.CheckI9(empty, o), check.CheckI5(empty, o)...)
	// What follows from the loss: recovery starts the operation over.
	vs = append(vs, check.Violation{Invariant: check.I4, Operation: op, Message: "illegal stage change PREPARED -> PREPARED"})
	id := strings.ToLower(string(p)) + "-power-loss"
	return verdict.CaseResult{Case: catalogue.Case{ID: id, System: faults.Ingestion, Point: p, Kind: faults.PowerLoss, Description: "power loss at " + string(p)},
		Verdict: verdict.Fail, Dir: "/work/" + id, Violations: vs, PowerLost: []string{"data/store.db: 28672 bytes written and not synced"}}
}

// doubleModelCall is another defect: the model called again after the
// plan was frozen (I1), with nothing lost.
func doubleModelCall() verdict.CaseResult {
	return verdict.CaseResult{Case: catalogue.Case{ID: "beforeprepare-crash", System: faults.Ingestion, Point: faults.BeforePrepare, Kind: faults.Crash, Description: "crash before prepare"},
		Verdict: verdict.Fail, Dir: "/work/beforeprepare-crash",
		Violations: []check.Violation{{Invariant: check.I1, Operation: "ingest-x",
			Message: "the model was called 2 times for this operationId, but the persisted plan came from call 1: the model was called again after the plan was frozen"}}}
}

// leaseNotHandedOver is a root cause that is no forgotten write: the lock
// provider kept an expired lease.
func leaseNotHandedOver() verdict.CaseResult {
	return verdict.CaseResult{Case: catalogue.Case{ID: "beforeleasecheck-pause", System: faults.Ingestion, Point: faults.BeforeLeaseCheck, Kind: faults.Pause, Description: "pause"},
		Verdict: verdict.Fail, Dir: "/work/beforeleasecheck-pause",
		Violations: []check.Violation{
			{Invariant: check.I7, Document: "d2", RootCause: true, Message: "the lock provider did not hand over an expired lease: recover/3 was refused at 900 by fault/2's lease (token 1) on d2, 600ms after that holder stopped at 300"},
			{Invariant: check.I5, Operation: "ingest-y", Message: "the operation is stuck at PREPARED after recovery quiesced (attempts 1)"},
		}}
}

func unsyncedReport() (verdict.Report, []string) {
	windows := []struct {
		p      faults.Point
		writes int
	}{{faults.BeforeGraphWrite, 1}, {faults.BeforeStateCommit, 2}, {faults.BeforeRecordVersion, 3}, {faults.BeforeCompleted, 4}}
	var results []verdict.CaseResult
	var ids []string
	for _, w := range windows {
		r := unsyncedCase(w.p, w.writes)
		results = append(results, r)
		ids = append(ids, r.Case.ID)
	}
	return testReport(append(results, doubleModelCall(), leaseNotHandedOver())...), ids
}

// One defect, one root cause: a store that skips its fsync loses, at each
// power-loss window, whatever it wrote last (an operation, a stage, a
// state, a version; I9 and I5 both say so): the digest, the HTML and the
// JUnit XML name one root cause over the four cases, with what was lost,
// and fold what follows from it under it. A defect of another kind (a
// second model call, a lease the lock provider did not hand over) stays a
// cause of its own. Before, the four cases read as 5 root causes (one per
// kind of record lost and invariant), 6 with the lease's.
func TestOneLostWriteDefectIsOneRootCause(t *testing.T) {
	rep, ids := unsyncedReport()
	d := Summarize(rep, testOpts)
	const forgot = "the store forgot writes it had acknowledged"
	var roots []Cause
	var lost *Cause
	for i, c := range d.Causes {
		if c.Root {
			roots = append(roots, c)
		}
		for _, cr := range c.Cases {
			for _, id := range ids {
				if cr.ID == id && c.Root && lost != nil && lost.Summary != c.Summary {
					t.Errorf("power-loss case %s is under two root causes: %q and %q", id, lost.Summary, c.Summary)
				}
				if cr.ID == id && c.Root && lost == nil {
					lost = &d.Causes[i]
				}
			}
		}
	}
	if len(roots) != 2 {
		var sums []string
		for _, c := range roots {
			sums = append(sums, c.Invariant+" in "+fmt.Sprint(len(c.Cases))+": "+c.Summary)
		}
		t.Fatalf("%d root causes, want 2 (the forgotten writes, the lease not handed over):\n%s", len(roots), strings.Join(sums, "\n"))
	}
	if lost == nil || lost.Summary != forgot || lost.Invariant != "I9" || len(lost.Cases) != len(ids) {
		t.Fatalf("the root cause of the power-loss cases: %+v, want %q (I9) in %d cases", lost, forgot, len(ids))
	}
	what := map[string]Forgotten{}
	for _, f := range lost.Forgot {
		what[f.What+"/"+f.Invariant] = f
	}
	for k, cases := range map[string]int{"operation/I9": 4, "operation stage/I9": 3, "document state/I9": 2, "version/I9": 1, "operation/I5": 4} {
		if what[k].Cases != cases {
			t.Errorf("forgot %s: %+v, want %d cases", k, what[k], cases)
		}
	}
	if len(lost.Consequences) != 1 || lost.Consequences[0].Invariant != "I4" || lost.Consequences[0].Cases != 4 {
		t.Errorf("folded under it: %+v, want I4 in 4 cases", lost.Consequences)
	}
	// The other defects stay apart: the I1 on its own, not a root; the
	// lease root with its own consequence.
	var i1, i7 *Cause
	for i, c := range d.Causes {
		switch c.Invariant {
		case "I1":
			i1 = &d.Causes[i]
		case "I7":
			i7 = &d.Causes[i]
		}
	}
	if i1 == nil || i1.Root || len(i1.Cases) != 1 || i1.Cases[0].ID != "beforeprepare-crash" {
		t.Errorf("the double model call: %+v, want a cause of its own, no root", i1)
	}
	if i7 == nil || !i7.Root || len(i7.Cases) != 1 || len(i7.Consequences) != 1 || i7.Consequences[0].Invariant != "I5" || i7.Summary == forgot {
		t.Errorf("the lease not handed over: %+v, want a root cause of its own with the stuck I5 under it", i7)
	}
	// Every invariant's total is still its causes' violations plus those
	// folded under them.
	checkTotals(t, d)
	for _, b := range d.Broken {
		if b.Invariant == "I5" && (b.FoldedUnder != "I9" || b.Violations != 5 || b.FoldedViolations != 5) {
			t.Errorf("I5: %+v, want its 4 forgotten operations folded under I9 and the stuck one under I7", b)
		}
	}

	var term bytes.Buffer
	WriteTerminal(&term, rep, testOpts)
	out := term.String()
	for _, want := range []string{"FAILURES by cause, rarest first (3 causes", "I9 in 4 cases (", "): " + forgot + "\n",
		"forgot: operation in 4 cases, operation in 4 cases (I5), operation stage in 3 cases, document state in 2 cases, version in 1 case",
		"and I5 ×4 saying the same"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "the store forgot") != 1 {
		t.Errorf("terminal: the lease root cause reads as a forgotten write, or the forgotten writes as more than one cause:\n%s", out)
	}

	var html bytes.Buffer
	if err := WriteHTML(&html, rep, testOpts); err != nil {
		t.Fatal(err)
	}
	page := html.String()
	causes := page[strings.Index(page, `<ol class="causes">`):]
	causes = causes[:strings.Index(causes, "</ol>")]
	if n := strings.Count(causes, `<span class="root">root cause</span>`); n != 2 {
		t.Errorf("HTML lists %d root causes, want 2:\n%s", n, causes)
	}
	if !strings.Contains(causes, "in 4 cases (") || strings.Count(causes, forgot) != 1 || !strings.Contains(causes, "forgot: operation in 4 cases") {
		t.Errorf("HTML: the forgotten writes are not one cause over 4 cases:\n%s", causes)
	}

	// Each case's own list names what the store forgot.
	sec := page[strings.Index(page, `id="beforecompleted-power-loss"`):]
	sec = sec[:strings.Index(sec, "</section>")]
	for _, want := range []string{"(the store forgot this acknowledged operation stage)", "(the store forgot this acknowledged version)", "(follows from the root cause)"} {
		if !strings.Contains(sec, want) {
			t.Errorf("HTML: the case beforeCompleted x power-loss lacks %q", want)
		}
	}

	var junit bytes.Buffer
	if err := WriteJUnit(&junit, rep, testOpts); err != nil {
		t.Fatal(err)
	}
	x := junit.String()
	validateXSD(t, x)
	msgs := regexp.MustCompile(`<failure message="([^"]*)" type="invariant"`).FindAllStringSubmatch(x, -1)
	if len(msgs) != 6 {
		t.Fatalf("JUnit: %d failures, want 6", len(msgs))
	}
	for _, id := range ids {
		r := rep.Results[slicesIndex(rep, id)]
		m := failureMessage(r)
		if !strings.HasPrefix(m, "root cause: "+forgot+" (I9 ×") || strings.Count(m, "root cause") != 1 || !strings.Contains(m, "following from it: I4 ×1") {
			t.Errorf("JUnit message of %s: %q, want one root cause, the forgotten writes, with I4 following", id, m)
		}
	}
	if m := failureMessage(rep.Results[slicesIndex(rep, "beforecompleted-power-loss")]); !strings.Contains(m, "I9 ×4, I5 ×1: operation, operation stage, document state, version") {
		t.Errorf("JUnit message of the last window does not say what was lost: %q", m)
	}
	if m := failureMessage(doubleModelCall()); !strings.HasPrefix(m, "broken: I1 ×1") {
		t.Errorf("JUnit message of the double model call: %q", m)
	}
	suite := x[strings.Index(x, "<testsuite "):]
	suite = suite[strings.LastIndex(suite, "<system-out>"):]
	if strings.Count(suite, forgot) != 1 || !strings.Contains(suite, "I9 in 4 cases") {
		t.Errorf("JUnit suite digest does not name the forgotten writes once over 4 cases:\n%s", suite)
	}
}

func slicesIndex(rep verdict.Report, id string) int {
	for i, r := range rep.Results {
		if r.Case.ID == id {
			return i
		}
	}
	return -1
}
