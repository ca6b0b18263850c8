package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

const opA = "r1-case-1/ingest-3e9c078181c692f382db29aaf971335a"

// forgetfulCase is a case on a store that forgot everything across the
// restart: I5 says so, and the I2 and I7 it implies follow.
func forgetfulCase(id string, p faults.Point) verdict.CaseResult {
	tl := []history.Record{
		{Worker: "fault", PID: 10, Kind: history.Start, Actions: 1},
		{Worker: "fault", Kind: history.Event, Event: &reference.Event{Kind: reference.EvLeaseAcquire, DocumentID: "d1", Holder: "fault/10#1", Token: 1, At: 1000}},
		{Worker: "fault", Kind: history.Event, Event: &reference.Event{Kind: reference.EvPrepared, OperationID: opA, DocumentID: "d1", Detail: "fp1", At: 1002}},
		{Worker: "fault", Kind: history.Event, Event: &reference.Event{Kind: reference.EvStateCommit, OperationID: opA, DocumentID: "d1", Revision: 1, At: 1003}},
		{Worker: "fault", PID: 10, Kind: history.Hit, Point: p, Fault: &faults.Action{Kind: faults.Crash, Hit: 1}},
		{Worker: "quiesce", PID: 11, Kind: history.Start, Actions: 1},
		{Worker: "quiesce", Kind: history.Event, Event: &reference.Event{Kind: reference.EvLeaseAcquire, DocumentID: "d1", Holder: "quiesce/11#1", Token: 1, At: 1040}},
		{Worker: "quiesce", Kind: history.Event, Event: &reference.Event{Kind: reference.EvStateCommit, OperationID: "r1-case-1/ingest-other", DocumentID: "d1", Revision: 1, At: 1045}},
		{Worker: "quiesce", Kind: "server-restart", Reason: "postgres restarted"},
		{Worker: "quiesce", Kind: history.Exit, Reason: "done"},
	}
	return verdict.CaseResult{
		Case:    catalogue.Case{ID: id, System: faults.Ingestion, Point: p, Kind: faults.Crash, Description: "crash at " + string(p)},
		Verdict: verdict.Fail, Hits: map[string]int{string(p): 1}, Dir: "/work/" + id, Timeline: tl,
		Workers: []verdict.WorkerResult{{Worker: "fault", PID: 10, Exit: "killed (SIGKILL)"}, {Worker: "quiesce", PID: 11, Exit: "ok"}},
		Violations: []check.Violation{
			{Invariant: check.I5, Operation: opA, RootCause: true, Events: []int{1}, Message: "the operation was persisted (the history saw createIfAbsent succeed) but the store has no record of it after restart: the plan and stage are gone"},
			{Invariant: check.I2, Document: "d1", Operation: "r1-case-1/ingest-other", Events: []int{2, 4}, Message: "revision 1 was committed twice (lost update)"},
			{Invariant: check.I7, Document: "d1", Events: []int{0, 3}, Message: "fencing token did not grow: quiesce/11#1 got token 1 after fault/10#1 held 1"},
		},
	}
}

// independentCase breaks I2 on a store that forgot nothing.
func independentCase() verdict.CaseResult {
	return verdict.CaseResult{
		Case:    catalogue.Case{ID: "class-competing-revision", System: faults.Ingestion, Class: "competing-revision", Description: "two versions race"},
		Verdict: verdict.Fail, Hits: map[string]int{"beforeLeaseCheck": 1}, Dir: "/work/class-competing-revision",
		Timeline: []history.Record{{Worker: "fault", PID: 20, Kind: history.Start}, {Worker: "fault", Kind: history.Event, Event: &reference.Event{Kind: reference.EvStateCommit, OperationID: "r1/ingest-x", DocumentID: "d3", Expected: 0, Revision: 2, At: 5}}},
		Workers:  []verdict.WorkerResult{{Worker: "fault", PID: 20, Exit: "ok"}},
		Violations: []check.Violation{{Invariant: check.I2, Document: "d3", Operation: "r1/ingest-x", Events: []int{0},
			Message: "a state commit moved revision 0 to 2"}},
	}
}

func notExercisedCase() verdict.CaseResult {
	return verdict.CaseResult{
		Case:    catalogue.Case{ID: "beforecompleted-pause", System: faults.Ingestion, Point: faults.BeforeCompleted, Kind: faults.Pause, Description: "pause"},
		Verdict: verdict.NotExercised, Hits: map[string]int{}, Dir: "/work/beforecompleted-pause",
		Notes: []string{"failpoint beforeCompleted never fired in worker fault",
			verdict.EarlierAttempts + "attempt 1: failpoint beforeCompleted never fired in worker fault"},
	}
}

func testReport(results ...verdict.CaseResult) verdict.Report {
	rep := verdict.Report{Backend: "memory", Seed: 7, Started: time.Date(2026, 11, 30, 19, 0, 0, 0, time.UTC), Took: 1500 * time.Millisecond, Results: results}
	rep.Finish()
	return rep
}

var testOpts = Options{Command: "certify", Rerun: "crashmatrix certify --backend memory", Replay: func(r verdict.CaseResult) string { return "crashmatrix certify --backend memory --case " + r.Case.ID }}

func failingReport() verdict.Report {
	return testReport(
		forgetfulCase("beforegraphwrite-crash", faults.BeforeGraphWrite),
		forgetfulCase("beforestatecommit-crash", faults.BeforeStateCommit),
		independentCase(),
		notExercisedCase(),
	)
}

func TestDigestFoldsConsequencesUnderTheRootCauseAndListsRarestFirst(t *testing.T) {
	d := Summarize(failingReport(), testOpts)
	if d.Verdict != "NOT CERTIFIED" {
		t.Fatalf("verdict %q, want NOT CERTIFIED", d.Verdict)
	}
	if len(d.Causes) != 2 {
		t.Fatalf("causes: got %d, want 2 (the independent I2, the root I5): %+v", len(d.Causes), d.Causes)
	}
	first, root := d.Causes[0], d.Causes[1]
	if first.Invariant != "I2" || len(first.Cases) != 1 || first.Cases[0].ID != "class-competing-revision" || first.Root {
		t.Errorf("rarest cause: got %+v, want the independent I2 of class-competing-revision", first)
	}
	if root.Invariant != "I5" || !root.Root || len(root.Cases) != 2 || root.Violations != 2 {
		t.Errorf("root cause: got %+v, want I5 in 2 cases", root)
	}
	folded := map[string]int{}
	for _, c := range root.Consequences {
		folded[c.Invariant] += c.Violations
	}
	if folded["I2"] != 2 || folded["I7"] != 2 || len(folded) != 2 {
		t.Errorf("folded under I5: got %v, want I2 2 and I7 2", folded)
	}
	if first.Cases[0].Replay != "crashmatrix certify --backend memory --case class-competing-revision" {
		t.Errorf("replay of the rarest case: %q", first.Cases[0].Replay)
	}
	byInv := map[string]Broken{}
	for _, b := range d.Broken {
		byInv[b.Invariant] = b
	}
	if b := byInv["I2"]; b.Cases != 3 || b.FoldedCases != 2 || b.FoldedUnder != "I5" || b.Rarest.ID != "class-competing-revision" {
		t.Errorf("I2: got %+v, want 3 cases, 2 folded under I5, rarest class-competing-revision", b)
	}
	if b := byInv["I7"]; b.Cases != 2 || b.FoldedCases != 2 {
		t.Errorf("I7: got %+v, want 2 cases, both folded", b)
	}
	if len(d.NotExercised) != 1 || !strings.Contains(d.NotExercised[0].Why, "never fired") || !strings.Contains(d.NotExercised[0].Why, "the code path changed") || strings.Contains(d.NotExercised[0].Why, "attempt 1") {
		t.Errorf("not exercised: got %+v, want the case's own reason and what it can mean, without the earlier attempts", d.NotExercised)
	}
	for _, want := range []string{"I2 in 3 cases", "I5 in 2 cases", "I7 in 2 cases", "1 not exercised (beforeCompleted x pause)"} {
		if !strings.Contains(d.Headline, want) {
			t.Errorf("headline %q does not say %q", d.Headline, want)
		}
	}
}

// A stale answer (I9, marked a consequence by the checker) is no root
// cause: where a store forgot what it had acknowledged, it follows from
// that loss and folds under it; other I9s still explain their case.
func TestStaleAnswerIsNoRootCause(t *testing.T) {
	if IsRoot(check.Violation{Invariant: check.I9, Consequence: true}) {
		t.Error("a stale answer counted as a root cause")
	}
	if !IsRoot(check.Violation{Invariant: check.I9}) || !IsRoot(check.Violation{Invariant: check.I5, RootCause: true}) || IsRoot(check.Violation{Invariant: check.I7}) {
		t.Error("IsRoot changed for violations that are not consequences")
	}
}

func TestVerdictNamesWhatIsWrongWhenOnlyAFaultStoppedFiring(t *testing.T) {
	d := Summarize(testReport(notExercisedCase()), testOpts)
	if d.Verdict != "NOT CERTIFIED" || strings.Contains(d.Headline, "[]") || !strings.Contains(d.Headline, "beforeCompleted x pause") {
		t.Errorf("headline %q: want NOT CERTIFIED naming the case that was not exercised", d.Headline)
	}
	var b bytes.Buffer
	WriteTerminal(&b, testReport(notExercisedCase()), testOpts)
	out := b.String()
	if strings.Contains(out, "broken invariants []") || !strings.Contains(out, "which can mean the code path changed") {
		t.Errorf("terminal output does not say why the case was not exercised:\n%s", out)
	}
}

func TestSummaryElidesIdsButKeepsTheSentence(t *testing.T) {
	for msg, want := range map[string]string{
		"fencing token did not grow: quiesce/3299#1 got token 1 after fault/3282#1 held 1": "fencing token did not grow: … got token … after … held …",
		"the thread's checkpoint is gone after restart":                                    "the thread's checkpoint is gone after restart",
		"illegal stage change PREPARED -> COMPLETED":                                       "illegal stage change PREPARED -> COMPLETED",
		// One bug found at every window is one cause, whichever window
		// and worker (a store that skips its directory fsync gave 62
		// "causes" of one I9).
		"an acknowledged write is missing right after machine (power loss) restart #1 (SIGKILL at beforeGraphWrite, reached by worker fault; back after 0s): operation ingest-1 was created":      "an acknowledged write is missing right after machine (power loss) restart … (SIGKILL at …, reached by worker …; back after …): operation … was created",
		"an acknowledged write is missing right after machine (power loss) restart #1 (SIGKILL at recoveryBeforeClaim, reached by worker recover; back after 0s): operation ingest-2 was created": "an acknowledged write is missing right after machine (power loss) restart … (SIGKILL at …, reached by worker …; back after …): operation … was created",
	} {
		if got := Summary(msg); got != want {
			t.Errorf("Summary(%q) = %q, want %q", msg, got, want)
		}
	}
}

func TestTerminalEndsWithEachBrokenInvariantItsCountRarestCaseAndReplay(t *testing.T) {
	var b bytes.Buffer
	WriteTerminal(&b, failingReport(), testOpts)
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	last := strings.Join(lines[len(lines)-8:], "\n")
	for _, want := range []string{
		"I2 no stale-revision commit", "3 cases", "2 following from I5", "rarest: competing-revision",
		"crashmatrix certify --backend memory --case class-competing-revision",
		"I5 liveness", "I7 leases",
	} {
		if !strings.Contains(last, want) {
			t.Errorf("last screen lacks %q:\n%s", want, last)
		}
	}
	if strings.Contains(b.String(), "fingerprint at persist time") {
		t.Errorf("the default output lists evidence; that is for -v")
	}
	b.Reset()
	o := testOpts
	o.Details = true
	WriteTerminal(&b, failingReport(), o)
	if !strings.Contains(b.String(), "history: /work/beforegraphwrite-crash/history.jsonl") || !strings.Contains(b.String(), "revision 1 was committed twice") {
		t.Errorf("-v does not list each violation with its history:\n%s", b.String())
	}
}

// Every in-page link of the HTML report points at an element that exists,
// the timeline has a column per worker process with KILL and RESTART
// markers, operations get short names with the full id on hover, the
// cited events are highlighted, and unknown record kinds still show.
func TestHTMLLinksResolveAndTheTimelineExplainsItself(t *testing.T) {
	for name, rep := range map[string]verdict.Report{"failing": failingReport(), "passing": passingReport()} {
		var b bytes.Buffer
		if err := WriteHTML(&b, rep, testOpts); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		ids := map[string]bool{}
		for _, m := range regexp.MustCompile(` id="([^"]+)"`).FindAllStringSubmatch(page, -1) {
			ids[m[1]] = true
		}
		for _, m := range regexp.MustCompile(`href="#([^"]*)"`).FindAllStringSubmatch(page, -1) {
			if !ids[m[1]] {
				t.Errorf("%s report: link #%s points nowhere", name, m[1])
			}
		}
		if name == "passing" {
			if !strings.Contains(page, "CERTIFIED") || strings.Contains(page, "NOT CERTIFIED") {
				t.Errorf("passing report does not say CERTIFIED")
			}
			continue
		}
		sec := page[strings.Index(page, `id="beforegraphwrite-crash"`):]
		sec = sec[:strings.Index(sec, "</section>")]
		for _, want := range []string{
			`<th>fault <span class="meta">pid 10</span>`, `<th>quiesce <span class="meta">pid 11</span>`,
			`<b>KILL</b> killed (SIGKILL)`, `<b>RESTART</b> pid 11 · 1 action`, `<b>FAULT</b> beforeGraphWrite fired: crash@1`,
			`<abbr class="op" title="` + opA + `">A</abbr>`, ">&#43;0 ms</td>", ">&#43;45 ms</td>",
			`<tr id="beforegraphwrite-crash-r3" class="cited">`, `<b>SERVER-RESTART</b>`,
			`<a href="#beforegraphwrite-crash-r3">`, "root cause", "follows from the root cause",
		} {
			if !strings.Contains(sec, want) {
				t.Errorf("failing case section lacks %q", want)
			}
		}
		if strings.Contains(sec, "state-commit "+opA) || strings.Contains(sec, "prepared "+opA) {
			t.Errorf("the timeline shows the full operation id as text instead of its short name")
		}
		for _, want := range []string{"I1", "I8", "pass N", "not-exercised", "does not apply at this window", "NOT CERTIFIED"} {
			if !strings.Contains(page, want) {
				t.Errorf("report lacks %q (key or verdict)", want)
			}
		}
	}
}

func passingReport() verdict.Report {
	r := forgetfulCase("beforegraphwrite-crash", faults.BeforeGraphWrite)
	r.Verdict, r.Violations = verdict.Pass, nil
	return testReport(r)
}

func TestJSONCarriesTheDigest(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, failingReport(), testOpts); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Backend string `json:"backend"`
		Digest  Digest `json:"digest"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Backend != "memory" || got.Digest.Verdict != "NOT CERTIFIED" || len(got.Digest.Causes) != 2 || got.Digest.Causes[0].Cases[0].Replay == "" {
		t.Errorf("JSON digest: %+v", got.Digest)
	}
}

// The JUnit XML validates against the JUnit schema CI servers read, and
// carries what a CI page needs to be useful: seed, backend, the cause in
// the failure message, the history and the replay command.
func TestJUnitValidatesAndSaysWhatBroke(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJUnit(&b, failingReport(), testOpts); err != nil {
		t.Fatal(err)
	}
	x := b.String()
	for _, want := range []string{
		`<property name="seed" value="7">`, `<property name="backend" value="memory">`,
		`<property name="replay" value="crashmatrix certify --backend memory">`, `<property name="histories" value="/work">`,
		`message="root cause: I5 ×1 (the operation was persisted`, `following from it: I2 ×1 (revision … was committed twice (lost update)); I7 ×1`,
		`message="broken: I2 ×1 (a state commit moved revision … to …)"`,
		`message="not exercised: failpoint beforeCompleted never fired in worker fault, which can mean the code path changed"`,
		"history: /work/beforegraphwrite-crash/history.jsonl", "replay: crashmatrix certify --backend memory --case beforegraphwrite-crash",
	} {
		if !strings.Contains(x, want) {
			t.Errorf("JUnit lacks %q", want)
		}
	}
	validateXSD(t, x)
}

func validateXSD(t *testing.T, doc string) {
	t.Helper()
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		t.Fatalf("xmllint is needed to validate the JUnit XML against testdata/junit.xsd: run `make tools` (apt-get install libxml2-utils)")
	}
	f := filepath.Join(t.TempDir(), "junit.xml")
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(xmllint, "--noout", "--schema", "testdata/junit.xsd", f).CombinedOutput()
	if err != nil {
		t.Fatalf("JUnit XML does not validate against testdata/junit.xsd: %v\n%s", err, out)
	}
	// The schema bites: a testcase without its name is refused.
	bad := strings.Replace(doc, `<testcase name=`, `<testcase nom=`, 1)
	if err := os.WriteFile(f, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(xmllint, "--noout", "--schema", "testdata/junit.xsd", f).CombinedOutput(); err == nil {
		t.Fatalf("the schema accepted a testcase without a name:\n%s", out)
	}
}

func TestSequenceTellsTheCaseOnOneLine(t *testing.T) {
	got := Sequence(forgetfulCase("beforegraphwrite-crash", faults.BeforeGraphWrite))
	want := "fault: A prepared for d1 · A commits d1 rev 0→1 · FAULT beforeGraphWrite crash@1 · KILL fault | quiesce: B commits d1 rev 0→1"
	if got != want {
		t.Errorf("Sequence:\n got %s\nwant %s", got, want)
	}
	vs, _, legend := Explain(forgetfulCase("c", faults.BeforeGraphWrite), "I2")
	if len(vs) != 1 || !strings.HasPrefix(vs[0], "I2: revision 1 was committed twice (lost update) [op B]") || len(legend) != 2 || legend[0] != "A = "+opA {
		t.Errorf("Explain: violations %q, legend %q", vs, legend)
	}
}

// TestFilteredRunSaysItIsASubset: a run narrowed by --point, --kind or
// --class certifies its cases only; the verdict line, the HTML and the
// JUnit properties say which subset ran; the whole matrix says nothing of
// the kind.
func TestFilteredRunSaysItIsASubset(t *testing.T) {
	whole := passingReport()
	if h := Summarize(whole, Options{}).Headline; !strings.HasPrefix(h, "CERTIFIED: all ") || strings.Contains(h, "subset") {
		t.Fatalf("whole matrix: headline %q", h)
	}
	sub := passingReport()
	sub.Subset = "--point beforeCompleted --kind crash"
	d := Summarize(sub, Options{})
	if d.Verdict != "CERTIFIED" || !strings.HasPrefix(d.Headline, "CERTIFIED (a subset, --point beforeCompleted --kind crash; not the whole matrix): ") {
		t.Fatalf("subset: verdict %q, headline %q", d.Verdict, d.Headline)
	}
	var term, html, junit strings.Builder
	WriteTerminal(&term, sub, Options{})
	if n := strings.Count(term.String(), "a subset, --point beforeCompleted --kind crash"); n != 2 {
		t.Errorf("terminal names the subset %d times, want at the top and at the end:\n%s", n, term.String())
	}
	if err := WriteHTML(&html, sub, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), `only the cases of <code>--point beforeCompleted --kind crash</code> ran`) {
		t.Error("HTML does not name the subset")
	}
	if err := WriteJUnit(&junit, sub, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(junit.String(), `<property name="subset" value="--point beforeCompleted --kind crash">`) {
		t.Error("JUnit has no subset property")
	}
}

// TestScenarioThatBrokeWhatItExpectsIsNotAFailure: crashmatrix run judges
// a scenario by its expect block; one that expects a mutant to break
// invariants and sees them break met its expectation, and the reports say
// so as the command's own ok line and exit code do.
func TestScenarioThatBrokeWhatItExpectsIsNotAFailure(t *testing.T) {
	r := forgetfulCase("mutant-x", faults.BeforeGraphWrite)
	r.Expect = &verdict.Expectation{Met: true, Note: "broke I3 as expected"}
	rep := testReport(r)
	if rep.Verdict != verdict.Pass || rep.ExitCode != 0 {
		t.Fatalf("report verdict %s exit %d, want pass 0", rep.Verdict, rep.ExitCode)
	}
	d := Summarize(rep, Options{Command: "run"})
	if d.Verdict != "AS EXPECTED" || len(d.Causes) != 0 || d.Failed != 0 || len(d.Expected) != 1 {
		t.Fatalf("digest: verdict %q, %d causes, %d failed, expected %v", d.Verdict, len(d.Causes), d.Failed, d.Expected)
	}
	var junit strings.Builder
	if err := WriteJUnit(&junit, rep, Options{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(junit.String(), "<failure") {
		t.Errorf("JUnit fails a scenario that met its expectation:\n%s", junit.String())
	}

	r.Expect = &verdict.Expectation{Met: false, Note: "want I2 broken, broke I3"}
	rep = testReport(r)
	d = Summarize(rep, Options{Command: "run"})
	if rep.ExitCode != 1 || d.Verdict != "NOT AS EXPECTED" || !strings.Contains(d.Headline, "want I2 broken, broke I3") {
		t.Fatalf("unmet: exit %d, verdict %q, headline %q", rep.ExitCode, d.Verdict, d.Headline)
	}
}

// TestCountsAgreeBetweenCausesAndInvariants: a root cause with violations
// of its own invariant folded under it (the memory backend's I8: 8 root
// violations, 4 more folded) reads the same total at the top (the cause)
// and at the end (the invariant), and the HTML never shows "0 (I5)" for
// the root cause's own invariant.
func TestCountsAgreeBetweenCausesAndInvariants(t *testing.T) {
	var results []verdict.CaseResult
	for _, id := range []string{"a-crash", "b-crash"} {
		r := forgetfulCase(id, faults.BeforeGraphWrite)
		r.Violations = append(r.Violations, check.Violation{Invariant: check.I5, Operation: opA, Message: "the operation never reached a final stage"})
		results = append(results, r)
	}
	rep := testReport(results...)
	d := Summarize(rep, testOpts)
	var i5 Broken
	for _, b := range d.Broken {
		if b.Invariant == "I5" {
			i5 = b
		}
	}
	if i5.Violations != 4 || i5.FoldedViolations != 2 || i5.FoldedUnder != "I5" {
		t.Fatalf("I5: %+v, want 4 violations, 2 folded under I5", i5)
	}
	checkTotals(t, d)
	var term strings.Builder
	WriteTerminal(&term, rep, testOpts)
	out := term.String()
	for _, want := range []string{"I5 in 2 cases (2 violations, 4 with the 2 more I5 folded under it)", "4 violations (2 of them folded under the I5 root cause)"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal lacks %q:\n%s", want, out)
		}
	}
	var html strings.Builder
	if err := WriteHTML(&html, rep, testOpts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "(2 violations, 4 with the 2 more I5 folded under it)") {
		t.Errorf("HTML: the cause line does not add the I5 folded under it")
	}
	if !strings.Contains(html.String(), "<td>2 of 4 violations (I5)</td>") || strings.Contains(html.String(), "<td>0 (I5)</td>") {
		t.Errorf("HTML: the I5 row does not say how many of its violations are folded")
	}
}

// TestTimelineRendersSeenRecordsReadably: every kind of observation the
// harness records reads as a sentence in the HTML timeline, never as the
// record's raw JSON.
func TestTimelineRendersSeenRecordsReadably(t *testing.T) {
	obs := []history.Observation{
		{What: history.SeenIntent, Do: "ingest", Doc: "d1", ContentHash: "abcdef0123456789", Base: 2},
		{What: history.SeenIntent, Thread: "t1", Owner: "alice", Op: opA},
		{What: history.SeenModel, Op: opA, Doc: "d1", ContentHash: "abcdef0123456789", Base: 2},
		{What: history.SeenFreeze, Op: opA, Doc: "d1", Plan: "feedbeef00112233", Items: []string{"n1", "e1"}, Base: 2},
		{What: history.SeenCommit, Op: opA, Doc: "d1", Expected: 2, Revision: 3, Status: "ACTIVE"},
		{What: history.SeenGraph, Op: opA, Items: []string{"n1"}, Deleted: 1},
		{What: history.SeenClaim, Op: opA, Holder: "fault/10#1", Until: 1250, Granted: true},
		{What: history.SeenUnclaim, Op: opA, Holder: "fault/10#1"},
		{What: history.SeenSave, Thread: "t1", Owner: "alice", Op: opA, ID: 7},
		{What: history.SeenSave, Thread: "t1", Owner: "alice", Op: opA, Err: "unique violation"},
	}
	want := []string{"intent: ingest d1", "intent: thread t1 (owner alice)", "model answered", "plan frozen (CreateIfAbsent created it)",
		"2 upserts at rev 2", "state committed", "rev 2→3 ACTIVE", "graph written", "1 upsert, 1 delete", "until 1250: granted",
		"claim released", "(it did not hold it)", "→ row 7", "error: unique violation"}
	r := forgetfulCase("seen-case", faults.BeforeGraphWrite)
	for i := range obs {
		r.Timeline = append(r.Timeline, history.Record{Worker: "fault", Kind: history.Seen, Obs: &obs[i]})
	}
	var b strings.Builder
	if err := WriteHTML(&b, testReport(r), testOpts); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, "&#34;what&#34;") || strings.Contains(page, "<b>SEEN</b> <code>") {
		t.Error("a SEEN record is shown as raw JSON")
	}
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("timeline lacks %q", w)
		}
	}
}

// TestUndecidedReadsEachReasonOnce: the same reason in many cases (an
// interrupted run, an unreachable server seen by the calibration and the
// probe) is printed once with the cases it stopped, and the verdict line
// stays short however many cases there are.
func TestUndecidedReadsEachReasonOnce(t *testing.T) {
	dial := "snapshot: postgres open (host 127.0.0.1 port 1): failed to connect:\n\t127.0.0.1:1: dial error: connection refused (2 attempts)"
	var results []verdict.CaseResult
	results = append(results,
		verdict.CaseResult{Case: catalogue.Case{ID: "calibration", Class: "calibration"}, Verdict: verdict.Undecided, Notes: []string{"calibration on backend postgres: " + dial}},
		verdict.CaseResult{Case: catalogue.Case{ID: "probe", Class: "probe"}, Verdict: verdict.Undecided, Notes: []string{dial}})
	for i := range 100 {
		results = append(results, verdict.CaseResult{Case: catalogue.Case{ID: fmt.Sprintf("c%d", i), Class: fmt.Sprintf("c%d", i)}, Verdict: verdict.Undecided, Notes: []string{"interrupted"}})
	}
	rep := testReport(results...)
	var b strings.Builder
	WriteTerminal(&b, rep, testOpts)
	out := b.String()
	if n := strings.Count(out, "connection refused"); n != 1 {
		t.Errorf("the dial error reads %d times, want once:\n%s", n, out)
	}
	d := Summarize(rep, testOpts)
	if len(d.Headline) > 400 || !strings.Contains(d.Headline, "and 97 more: interrupted") || !strings.Contains(d.Headline, "(in full below)") {
		t.Errorf("headline (%d bytes): %s", len(d.Headline), d.Headline)
	}
	if gs := UndecidedGroups(d.Undecided); len(gs) != 2 || len(gs[0].Cases) != 100 || len(gs[1].Cases) != 2 || !strings.HasPrefix(gs[1].Why, "calibration on backend postgres: ") {
		t.Errorf("groups, the most shared reason first: %+v", gs)
	}
	if !strings.HasPrefix(d.Headline, "UNDECIDED: c0, c1, c2 and 97 more: interrupted; calibration, probe: calibration on backend postgres: ") {
		t.Errorf("headline: %s", d.Headline)
	}
}

// Under go test (the Go API) the digest points at the run's reports for
// every violation: go test's -v is not the CLI's (it said "-v lists every
// violation" there too).
func TestDigestUnderGoTestPointsAtTheReports(t *testing.T) {
	var b bytes.Buffer
	WriteTerminal(&b, testReport(independentCase()), Options{Command: "go test ./mystore"})
	if out := b.String(); !strings.Contains(out, "report.html and report.json list every violation") || strings.Contains(out, "-v lists") {
		t.Errorf("go test digest:\n%s", out)
	}
	b.Reset()
	WriteTerminal(&b, testReport(independentCase()), Options{Command: "certify"})
	if !strings.Contains(b.String(), "; -v lists every violation") {
		t.Errorf("certify digest lost its -v hint:\n%s", b.String())
	}
}

// checkTotals checks that every broken invariant's total is its causes'
// violations plus those folded under other causes, and that no more of
// them are folded than there are.
func checkTotals(t *testing.T, d Digest) {
	t.Helper()
	for _, b := range d.Broken {
		n := 0
		for _, c := range d.Causes {
			if c.Invariant == b.Invariant {
				n += c.Violations
			}
			n += foldedOf(c, b.Invariant)
		}
		if n != b.Violations || b.FoldedViolations > b.Violations {
			t.Errorf("%s: causes and folded add up to %d, the invariant says %d (%d folded)", b.Invariant, n, b.Violations, b.FoldedViolations)
		}
	}
}
