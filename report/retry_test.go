package report

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	_ "github.com/crashmatrix/crashmatrix/sim/embedded" // the sqlite backend
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// A case whose fault never fires is run three times; its notes list each
// earlier attempt's reason once, flat, and the digest says why it was not
// exercised and what that can mean, never an empty list of invariants.
func TestANotExercisedCaseIsRetriedWithFlatNotes(t *testing.T) {
	r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, InProcess: true, WorkDir: t.TempDir(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.CloseShared()
	c := catalogue.Case{ID: "never-fires", System: faults.Ingestion, Class: "never-fires", Description: "expects a failpoint nothing arms",
		Steps: []catalogue.Step{{Worker: "fault", Actions: catalogue.StandardScript(), ExpectHit: []faults.Point{faults.BeforeCompleted}}}}
	rep := r.RunAll(context.Background(), []catalogue.Case{c}, 1, nil)
	res := rep.Results[0]
	if res.Verdict != verdict.NotExercised {
		t.Fatalf("verdict %s, want not exercised (notes %q)", res.Verdict, res.Notes)
	}
	var retried []string
	for _, n := range res.Notes {
		if strings.HasPrefix(n, verdict.EarlierAttempts) {
			retried = append(retried, n)
		}
	}
	if len(retried) != 1 {
		t.Fatalf("want one note on the earlier attempts, got %q", res.Notes)
	}
	if n := retried[0]; strings.Count(n, "attempt 1:") != 1 || strings.Count(n, "attempt 2:") != 1 || strings.Count(n, verdict.EarlierAttempts) != 1 {
		t.Errorf("earlier attempts nest or repeat: %q", n)
	}
	d := Summarize(rep, Options{})
	if len(d.NotExercised) != 1 || d.NotExercised[0].Why != "failpoint beforeCompleted never fired in worker fault (unreachable: worker fault ran all 5 actions without passing beforeCompleted); what to do: check that the failpoint is still on the code path (faults catalogue, reference service) and that the case's script leads there: this can mean the code path changed. With the reference service unchanged, suspect the stores: a store whose reads steer the service elsewhere (ListRecoverable leaving an operation out, a read answering wrongly) keeps it from the window; run the conformance suites (properties.Stores, or certify's conformance with --store-cmd)" {
		t.Errorf("not exercised: %+v", d.NotExercised)
	}
	if !strings.HasPrefix(d.Headline, "NOT CERTIFIED: 1 not exercised (never-fires)") {
		t.Errorf("headline %q", d.Headline)
	}
	var out strings.Builder
	WriteTerminal(&out, rep, Options{})
	if want := "\nrun again: 1 case was not exercised at first (2 earlier attempts; by cause: unreachable 2); each case's notes say why\n"; !strings.Contains(out.String(), want) {
		t.Errorf("the terminal report does not say the case was run again (%q):\n%s", want, out.String())
	}
}

// The terminal report counts the cases run again and their earlier
// attempts' causes; a run that needed none says nothing about it.
func TestTerminalSaysWhichCasesWereRunAgain(t *testing.T) {
	timing := verdict.Attempt{Reason: verdict.NotExercisedReason{Cause: verdict.CauseTiming}}
	server := verdict.Attempt{Reason: verdict.NotExercisedReason{Cause: verdict.CauseServerFault}}
	rep := verdict.Report{Verdict: verdict.Pass, Backend: "postgres", Counts: map[verdict.Verdict]int{verdict.Pass: 3}, Results: []verdict.CaseResult{
		{Case: catalogue.Case{ID: "a"}, Verdict: verdict.Pass, Attempts: []verdict.Attempt{timing, timing}},
		{Case: catalogue.Case{ID: "b"}, Verdict: verdict.Pass},
		{Case: catalogue.Case{ID: "c"}, Verdict: verdict.Pass, Attempts: []verdict.Attempt{server}},
	}}
	var out strings.Builder
	WriteTerminal(&out, rep, Options{})
	if want := "\nrun again: 2 cases were not exercised at first (3 earlier attempts; by cause: server-fault 1, timing 2); each case's notes say why\n"; !strings.Contains(out.String(), want) {
		t.Errorf("want %q in:\n%s", want, out.String())
	}
	rep.Results[0].Attempts, rep.Results[2].Attempts = nil, nil
	out.Reset()
	WriteTerminal(&out, rep, Options{})
	if strings.Contains(out.String(), "run again") {
		t.Errorf("a run without retries speaks of them:\n%s", out.String())
	}
}

// An in-process case keeps its history in memory; SaveTimelines writes it
// where the reports say it is, and it reads back equal.
func TestSaveTimelinesWritesInProcessHistories(t *testing.T) {
	r := forgetfulCase("beforegraphwrite-crash", faults.BeforeGraphWrite)
	r.Dir = ""
	rep := testReport(r)
	dir := t.TempDir()
	if err := SaveTimelines(dir, &rep); err != nil {
		t.Fatal(err)
	}
	path := HistoryPath(rep.Results[0])
	if path != filepath.Join(dir, "beforegraphwrite-crash", "history.jsonl") {
		t.Fatalf("history path %q", path)
	}
	back, err := history.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, history.Log(rep.Results[0].Timeline)) {
		t.Errorf("history read back differs:\n got %+v\nwant %+v", back, rep.Results[0].Timeline)
	}
}

// ci/bench-load.sh adds up the cases each run needed to run again from
// this line: its pattern must still match what the report prints (it once
// looked for them where they were not, and counted 0 for every run).
func TestLoadCheckReadsTheRunAgainLine(t *testing.T) {
	script, err := os.ReadFile("../ci/bench-load.sh")
	if err != nil {
		t.Fatal(err)
	}
	const sed = `s/^run again: ([0-9]+) cases? w.*/\1/p`
	if !strings.Contains(string(script), sed) {
		t.Fatalf("ci/bench-load.sh no longer reads the run-again count with %s", sed)
	}
	re := regexp.MustCompile(`^run again: ([0-9]+) cases? w`)
	for _, n := range []int{1, 2, 11} {
		var results []verdict.CaseResult
		for i := 0; i < n; i++ {
			results = append(results, verdict.CaseResult{Attempts: []verdict.Attempt{{Reason: verdict.NotExercisedReason{Cause: verdict.CauseTiming}}}})
		}
		line := rerunLine(verdict.Report{Results: results})
		if m := re.FindStringSubmatch(line); m == nil || m[1] != strconv.Itoa(n) {
			t.Errorf("the load check would not read %d from %q", n, line)
		}
	}
}

// A fail-fast run of a mutant starts no case after the first failure: the
// failure is reported, the cases never started are undecided with a note
// that says so, and the verdict stays NOT CERTIFIED (exit 1), not
// undecided. Without fail-fast, the same cases all run.
func TestFailFastStopsStartingCasesAfterTheFirstFailure(t *testing.T) {
	var cases []catalogue.Case
	for _, k := range []faults.Kind{faults.Split, faults.Crash, faults.Transient} {
		c, ok := catalogue.Lease(250*time.Millisecond).WindowCase(faults.LeaseAcquire, k)
		if !ok {
			c, ok = catalogue.Lease(250*time.Millisecond).WindowCase(faults.BeforeGraphWrite, k)
		}
		if !ok {
			t.Fatalf("no window case for %s", k)
		}
		cases = append(cases, c)
	}
	for _, failFast := range []bool{true, false} {
		r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, InProcess: true, WorkDir: t.TempDir(), Seed: 1,
			Bugs: []reference.Bug{reference.BugCASOnFreshRevision}, FailFast: failFast})
		if err != nil {
			t.Fatal(err)
		}
		rep := r.RunAll(context.Background(), cases, 1, nil)
		r.CloseShared()
		if rep.Results[0].Verdict != verdict.Fail || rep.ExitCode != 1 {
			t.Fatalf("fail-fast %v: the split case %s, exit %d; want it to fail, exit 1", failFast, rep.Results[0].Verdict, rep.ExitCode)
		}
		for _, res := range rep.Results[1:] {
			notRun := res.Verdict == verdict.Undecided && reflect.DeepEqual(res.Notes, []string{verdict.NotRunFailFast})
			if notRun != failFast {
				t.Errorf("fail-fast %v: case %s ended %s %q", failFast, res.Case.ID, res.Verdict, res.Notes)
			}
		}
	}
}

// ci/bench-load.sh reads each run's undecided count (issue 40: "0 undecided
// at load 10", its java backend) from the run line: its pattern must match
// what runLine prints, with and without cases not applicable.
func TestLoadCheckReadsTheUndecidedCount(t *testing.T) {
	script, err := os.ReadFile("../ci/bench-load.sh")
	if err != nil {
		t.Fatal(err)
	}
	const sed = `s/.* ([0-9]+) undecided.*/\1/p`
	if !strings.Contains(string(script), sed) {
		t.Fatalf("ci/bench-load.sh no longer reads the undecided count with %s", sed)
	}
	re := regexp.MustCompile(`.* ([0-9]+) undecided`)
	for _, c := range []struct{ undecided, na int }{{0, 0}, {3, 0}, {12, 14}} {
		rep := verdict.Report{Backend: "store-cmd", Counts: map[verdict.Verdict]int{verdict.Pass: 5, verdict.NotExercised: 7, verdict.Undecided: c.undecided, verdict.NotApplicable: c.na}}
		line := runLine(rep)
		if m := re.FindStringSubmatch(line); m == nil || m[1] != strconv.Itoa(c.undecided) {
			t.Errorf("the load check would not read %d undecided from %q", c.undecided, line)
		}
	}
}
