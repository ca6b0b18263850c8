package properties

import (
	"fmt"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The slow-sync-takeover finding on the store that checks before its
// fsync, written as a scenario as certify writes a failure (the faulted
// worker in the background with kind slow-sync at the window, the
// competitor's step after it, the final step resubmitting both) and read
// back, replays: three runs in three break the same invariants (I2 among
// them) again, the competitor
// taking the lease over while the worker's fsync holds; the same file on
// the store that checks in its commit passes.
func TestSlowSyncTakeoverFindingReplays(t *testing.T) {
	requireLazyFS(t)
	p := faults.BeforeStateCommit
	c, ok := catalogue.Lease(0).SlowSyncTakeoverCase(p)
	if !ok {
		t.Fatalf("no slow-sync-takeover case at %s", p)
	}
	run := crashrun.Run(t, journalBackend(), crashrun.Options{Cases: []catalogue.Case{c}, Mutant: statesCheckBeforeSync})
	var hit verdict.CaseResult
	for _, r := range run.Results {
		if r.Case.ID == c.ID {
			hit = r
		}
	}
	sc, err := scenarios.FromFailure(hit, run.Report, "", 0) // a Go store of the test: no backend a scenario names
	if err != nil {
		t.Fatalf("the takeover case on the store that checks before its fsync: %v (%v)", err, hit.Notes)
	}
	// The defect is this test's store's, no mutant a scenario names: the
	// replays below run the store with it.
	sc.Mutant = ""
	text, err := sc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("{point: %s, kind: slow-sync}", p), "background: true", "worker: competitor", "resubmit: [fault, competitor]", "breaks: [I2"} {
		if !strings.Contains(string(text), want) {
			t.Fatalf("the scenario does not say %q:\n%s", want, text)
		}
	}
	back, err := scenarios.Parse(sc.Name+".yaml", text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	replay := func(mutant string) []verdict.CaseResult {
		cases := make([]catalogue.Case, 3)
		for i := range cases {
			cases[i] = back.Case()
			cases[i].ID = fmt.Sprintf("%s-replay-%d", back.Name, i)
		}
		var out []verdict.CaseResult
		for _, r := range crashrun.Run(t, journalBackend(), crashrun.Options{Cases: cases, Mutant: mutant, Seed: back.Seed}).Results {
			if strings.HasPrefix(r.Case.ID, back.Name+"-replay-") {
				out = append(out, r)
			}
		}
		if len(out) != len(cases) {
			t.Fatalf("%d replays ran, want %d", len(out), len(cases))
		}
		return out
	}
	for i, r := range replay(statesCheckBeforeSync) {
		if err := back.JudgeResult(r); err != nil || !tookOverDuringTheSync(r.Timeline) {
			t.Errorf("replay %d: %v; competitor took over during the sync: %v", i+1, err, tookOverDuringTheSync(r.Timeline))
		}
	}
	for i, r := range replay("") {
		if r.Verdict != verdict.Pass || !tookOverDuringTheSync(r.Timeline) {
			t.Errorf("replay %d on the store that checks in its commit: %s %v; competitor took over during the sync: %v", i+1, r.Verdict, r.Notes, tookOverDuringTheSync(r.Timeline))
		}
	}
	t.Logf("the scenario:\n%s", text)
}
