package properties_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// A Go store on the embedded SQLite that writes an operation and its plan
// in two commits, with no window declared, is caught by the matrix's
// durable-step sweep (the lazy mount sees the two WAL syncs of
// CreateIfAbsent, and the worker is killed right after the first).
func TestDurableStepSweepCatchesAnUndeclaredTwoStepGoStore(t *testing.T) {
	rep := crashrun.Run(t, twoStepCreateBackend(false), crashrun.Options{Classes: []string{catalogue.DurableStepClass}}).Report
	if len(rep.StoreWindows) != 0 {
		t.Fatalf("the undeclared store reports store windows %+v", rep.StoreWindows)
	}
	var failed []string
	for _, r := range rep.Results {
		if r.Verdict == verdict.Fail && slices.Contains(r.Broken(), "I5") && strings.HasPrefix(r.Case.Description, "ops.create after ") {
			failed = append(failed, r.Case.ID)
		}
	}
	t.Logf("sweep cases failing I5 in ops.create: %v", failed)
	// A kill right after the first commit's sync, a power cut there, and
	// one that tears at sectors.
	if rep.ExitCode != 1 || len(failed) != 3 {
		var got []string
		for _, r := range rep.Results {
			got = append(got, r.Case.ID+" "+string(r.Verdict)+" "+strings.Join(r.Broken(), ","))
		}
		t.Fatalf("the undeclared two-step create: exit %d, ops.create sweep cases failing I5: %v; results %q", rep.ExitCode, failed, got)
	}
}

// The sweep's finding on the undeclared two-step Go store, written as a
// scenario as certify writes it (point durableStep, the store call, the
// step) and read back, replays 10 times in 10 with the same history: the
// kill lands after the same sync of the same call every time.
func TestDurableStepFindingReplays(t *testing.T) {
	b := twoStepCreateBackend(false)
	run := crashrun.Run(t, b, crashrun.Options{Classes: []string{catalogue.DurableStepClass + "-ops.create-1-of-2"}})
	i := slices.IndexFunc(run.Results, func(r verdict.CaseResult) bool { return r.Verdict == verdict.Fail })
	if i < 0 {
		t.Fatalf("the kill after ops.create's first sync did not fail: %v", run.Report.Counts)
	}
	sc, err := scenarios.FromFailure(run.Results[i], run.Report, "", 0) // a Go store of the test: no backend a scenario names
	if err != nil {
		t.Fatal(err)
	}
	text, err := sc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if want := "{point: durableStep, kind: crash, call: ops.create, step: 1, of: 2, syscall: "; !strings.Contains(string(text), want) {
		t.Fatalf("the scenario does not name the kill as %s:\n%s", want, text)
	}
	back, err := scenarios.Parse(sc.Name+".yaml", text)
	if err != nil {
		t.Fatal(err)
	}
	replays := replayTen(t, b, back)
	first := history.Trace(replays[0].Timeline)
	for i, r := range replays {
		if err := back.JudgeResult(r); err != nil {
			t.Errorf("replay %d: %v", i+1, err)
		}
		if tr := history.Trace(r.Timeline); !slices.Equal(tr, first) {
			t.Errorf("replay %d's history differs from replay 1's:\n%s\nvs\n%s", i+1, strings.Join(tr, "\n"), strings.Join(first, "\n"))
		}
	}
}
