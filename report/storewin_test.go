package report_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The reports name a store's windows in a section of their own and tally
// the random kills, naming the one that broke an invariant.
func TestReportsShowStoreWindowsAndRandomKills(t *testing.T) {
	w := catalogue.StoreWindow{Point: "mystore/afterOperationRow", System: faults.Ingestion, Methods: []string{"mystore.(*Ops).CreateIfAbsent"}, Hits: 5}
	results := windowResults(catalogue.Lease(250*time.Millisecond).StoreMatrix([]catalogue.StoreWindow{w}), func(c catalogue.Case) bool { return c.Kind == faults.Crash },
		failing(check.I5, "the operation has no persisted plan"))
	kills := catalogue.RandomKills(1, 3, catalogue.Probe{Base: 40 * time.Millisecond})
	for i, c := range kills {
		r := verdict.CaseResult{Case: c, Verdict: verdict.Pass, Hits: map[string]int{}}
		if i == 1 {
			r.Verdict = verdict.Fail
			r.Violations = []check.Violation{{Invariant: check.I2, Message: "revision chain broken"}}
			r.Notes = []string{"random kill of worker fault: seed 1000004, offset 1ms; last history event before the kill: x"}
		}
		results = append(results, r)
	}
	rep := verdict.Report{Backend: "mystore", Results: results, StoreWindows: []catalogue.StoreWindow{w}, Probed: true, ExitCode: 1, Verdict: verdict.Fail}
	if len(results) != len(faults.StoreKinds)+3 {
		t.Fatalf("%d results, want one per store kind and 3 kills", len(results))
	}

	var text bytes.Buffer
	report.WriteTerminal(&text, rep, report.Options{Details: true})
	row := ""
	for _, line := range strings.Split(text.String(), "\n") {
		if strings.HasPrefix(line, "mystore/afterOperationRow ") {
			row = strings.Join(strings.Fields(line)[:11], " ")
		}
	}
	if row != "mystore/afterOperationRow FAIL I5 pass 1 pass 1 pass 1 pass 1" {
		t.Errorf("store window row %q, want crash FAIL I5 and the other four kinds pass 1", row)
	}
	for _, want := range []string{"store window \\ fault", "in mystore.(*Ops).CreateIfAbsent, reached 5× in the probe",
		"random-instant kills: 3 cases: 2 pass, 1 FAIL", "FAIL random-kill-1000004", "seed 1000004, offset 1ms"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("terminal report lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "class random-kill") {
		t.Errorf("random kills listed as class rows:\n%s", text.String())
	}

	var html bytes.Buffer
	if err := report.WriteHTML(&html, rep, report.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<h2>Store windows</h2>", "<th>mystore/afterOperationRow</th>", "mystore.(*Ops).CreateIfAbsent (5× in the probe)",
		"<h2>Random-instant kills</h2>", `href="#random-kill-1000004"`} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}

	var js bytes.Buffer
	if err := report.WriteJSON(&js, rep, report.Options{}); err != nil {
		t.Fatal(err)
	}
	var back verdict.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.StoreWindows) != 1 || !back.Results[0].Case.Store || back.Results[len(back.Results)-2].Case.Steps[0].Kill == nil {
		t.Errorf("JSON report lost the store windows or the kills: %v", err)
	}

	var ju bytes.Buffer
	if err := report.WriteJUnit(&ju, rep, report.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(ju.Bytes(), new(struct{})); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`name="mystore/afterOperationRow x crash"`, `name="random-kill-1000004"`} {
		if !strings.Contains(ju.String(), want) {
			t.Errorf("JUnit report lacks %s", want)
		}
	}
}

// A power loss at a store window is a case like the others: the store
// window table has a power-loss column when the report has such cases,
// and a failing one shows there (it was run, counted in the verdict and
// missing from the table: a "·" where it failed).
func TestStoreWindowTableShowsPowerLoss(t *testing.T) {
	w := catalogue.StoreWindow{Point: "specstore/beforeOperationCommit", System: faults.Ingestion, Methods: []string{"ops.create"}, Hits: 2}
	cases := append(catalogue.Lease(250*time.Millisecond).StoreMatrix([]catalogue.StoreWindow{w}), catalogue.Lease(250*time.Millisecond).PowerLossMatrix([]catalogue.StoreWindow{w})...)
	results := windowResults(cases, func(c catalogue.Case) bool { return c.Store && c.Kind == faults.PowerLoss },
		failing(check.I7, "fencing token did not grow"))
	rep := verdict.Report{Backend: "store-cmd", Results: results, StoreWindows: []catalogue.StoreWindow{w}, Probed: true, ExitCode: 1, Verdict: verdict.Fail}
	if cols := verdict.StoreColumns(rep); len(cols) != len(faults.StoreKinds)+1 || cols[len(cols)-1] != faults.PowerLoss {
		t.Fatalf("store columns %v, want the store kinds and power-loss", cols)
	}
	var text bytes.Buffer
	report.WriteTerminal(&text, rep, report.Options{})
	var header, row string
	for _, line := range strings.Split(text.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "store window \\ fault"):
			header = line
		case strings.HasPrefix(line, "specstore/beforeOperationCommit "):
			row = strings.Join(strings.Fields(line), " ")
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(header), "power-loss") {
		t.Errorf("store window header %q has no power-loss column", header)
	}
	if !strings.Contains(row, "pass 1 FAIL I7 in ops.create") {
		t.Errorf("store window row %q, want the power-loss cell FAIL I7 after the five passing kinds", row)
	}
	var html bytes.Buffer
	if err := report.WriteHTML(&html, rep, report.Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "<th>recrash</th><th>power-loss</th><th>declared in</th>") {
		t.Errorf("HTML store window table has no power-loss column")
	}
}

// The store window table's columns come in the main matrix's order, and
// each case sits under its own kind: a store whose window failed on error
// only reads so in both tables (a reader compared the two and took an
// error failure for a permanent one, when the store table had unknown
// second and error third).
func TestStoreWindowColumnsFollowTheMatrix(t *testing.T) {
	w := catalogue.StoreWindow{Point: "specstore/beforePlanTx", System: faults.Ingestion, Methods: []string{"ops.create"}, Hits: 5}
	results := windowResults(catalogue.Lease(250*time.Millisecond).StoreMatrix([]catalogue.StoreWindow{w}), func(c catalogue.Case) bool { return c.Kind == faults.Transient },
		failing(check.I5, "operation without its plan"))
	rep := verdict.Report{Backend: "store-cmd", Results: results, StoreWindows: []catalogue.StoreWindow{w}, Probed: true, ExitCode: 1, Verdict: verdict.Fail}
	var main []faults.Kind
	for _, k := range verdict.Columns(rep) {
		if slices.Contains(faults.StoreKinds, k) {
			main = append(main, k)
		}
	}
	if cols := verdict.StoreColumns(rep); !slices.Equal(cols, main) {
		t.Fatalf("store columns %v, want the store kinds in the matrix's order %v", cols, main)
	}
	var text bytes.Buffer
	report.WriteTerminal(&text, rep, report.Options{})
	var header, row []string
	for _, line := range strings.Split(text.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "store window \\ fault"):
			header = strings.Fields(strings.TrimPrefix(line, "store window \\ fault"))
		case strings.HasPrefix(line, "specstore/beforePlanTx "):
			row = strings.Fields(line)[1:]
		}
	}
	// Cells are one or two words ("pass 1", "FAIL I5"): the error column's
	// is the second.
	if len(header) < 2 || header[1] != string(faults.Transient) || len(row) < 4 || strings.Join(row[2:4], " ") != "FAIL I5" || strings.Join(row[0:2], " ") != "pass 1" {
		t.Errorf("store window table: header %q, row %q; want the error column second, and its FAIL I5 there", header, row)
	}
}

// Cases set apart for different reasons are listed under each reason,
// and the headline says how many reasons there are rather than quoting
// the first one for all (a recrash that cannot recur beside System B's
// cases on a backend without System B).
func TestNotApplicableIsGroupedByReason(t *testing.T) {
	w := catalogue.StoreWindow{Point: "specstore/release", System: faults.Ingestion, Methods: []string{"ops.releaseClaim"}, Hits: 1, InRecovery: true}
	results := windowResults(catalogue.Lease(250*time.Millisecond).StoreMatrix([]catalogue.StoreWindow{w}), func(c catalogue.Case) bool { return c.Kind == faults.Recrash },
		func(r *verdict.CaseResult) {
			r.Verdict, r.Notes = verdict.NotApplicable, []string{verdict.RecrashNotApplicable}
		})
	planSave, _ := catalogue.Lease(250*time.Millisecond).PowerCase(faults.PlanSaveBeforeApprove, faults.PowerLoss)
	results = append(results, verdict.CaseResult{Case: planSave, Verdict: verdict.NotApplicable, Notes: []string{"backend store-cmd does not provide System B's stores"}})
	rep := verdict.Report{Backend: "store-cmd", Results: results, StoreWindows: []catalogue.StoreWindow{w}, Probed: true, Verdict: verdict.Pass,
		Counts: map[verdict.Verdict]int{verdict.Pass: len(results) - 2, verdict.NotApplicable: 2}}
	var text bytes.Buffer
	report.WriteTerminal(&text, rep, report.Options{})
	out := text.String()
	if strings.Count(out, "\nNOT APPLICABLE (1): ") != 2 || !strings.Contains(out, "NOT APPLICABLE (1): "+verdict.RecrashNotApplicable) {
		t.Errorf("want one NOT APPLICABLE block per reason:\n%s", out)
	}
	if !strings.Contains(out, "2 not applicable: 2 reasons, listed under NOT APPLICABLE") {
		t.Errorf("the headline quotes one reason for both:\n%s", out)
	}
}

// windowResults are a result for each case, a pass with its point fired,
// but for the cases odd picks, which set then changes.
func windowResults(cases []catalogue.Case, odd func(catalogue.Case) bool, set func(*verdict.CaseResult)) []verdict.CaseResult {
	var out []verdict.CaseResult
	for _, c := range cases {
		r := verdict.CaseResult{Case: c, Verdict: verdict.Pass, Hits: map[string]int{string(c.Point): 1}}
		if odd(c) {
			set(&r)
		}
		out = append(out, r)
	}
	return out
}

// failing makes a result fail on one violation of inv.
func failing(inv check.Invariant, msg string) func(*verdict.CaseResult) {
	return func(r *verdict.CaseResult) {
		r.Verdict = verdict.Fail
		r.Violations = []check.Violation{{Invariant: inv, Message: msg}}
	}
}
