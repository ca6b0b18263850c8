package properties_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// A protocol mutant that only a crash shows (a resumed operation asks the
// model again, reference.BugRecallModelOnResume) is caught by a random
// kill; the kill's finding, written as a scenario as certify writes it
// and read back, replays 10 times in 10 with the same history, because
// the kill lands at the store call or commit the scenario names rather
// than at a wall-clock offset.
func TestRandomKillFindingReplays(t *testing.T) {
	const ttl = 250 * time.Millisecond
	b := embedded.SQLite()
	bugs := []reference.Bug{reference.BugRecallModelOnResume}
	run := crashrun.Run(t, b, crashrun.Options{Classes: []string{catalogue.RandomKillClass}, RandomKills: 40, Bugs: bugs, LeaseTTL: ttl, StopAtFirstFailure: true})
	i := slices.IndexFunc(run.Results, func(r verdict.CaseResult) bool { return r.Verdict == verdict.Fail })
	if i < 0 {
		t.Fatalf("40 random kills never caught %s", bugs[0])
	}
	hit := run.Results[i]
	_, p, k, ok := catalogue.AnchoredKill(hit.Case)
	if !ok {
		t.Fatalf("%s caught it with a wall-clock kill: on the embedded SQLite backend every random kill is anchored", hit.Case.ID)
	}
	sc, err := scenarios.FromFailure(hit, run.Report, b.Name, ttl)
	if err != nil {
		t.Fatal(err)
	}
	text, err := sc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("{point: %s, kind: crash, hit: %d}", p, k); !strings.Contains(string(text), want) || !strings.Contains(string(text), string(bugs[0])) {
		t.Fatalf("the scenario does not name the kill (%s) and the mutant:\n%s", want, text)
	}
	back, err := scenarios.Parse(hit.Case.ID+".yaml", text)
	if err != nil {
		t.Fatal(err)
	}
	c := back.Case()
	cases := make([]catalogue.Case, 10)
	for i := range cases {
		cases[i] = c
		cases[i].ID = fmt.Sprintf("%s-replay-%d", c.ID, i)
	}
	var replays []verdict.CaseResult
	// (The report holds the probe's failure too: the mutant fails it.)
	for _, r := range crashrun.Run(t, b, crashrun.Options{Cases: cases, Bugs: back.Bugs, Seed: back.Seed, LeaseTTL: back.LeaseTTL, Parallel: 2}).Results {
		if strings.HasPrefix(r.Case.ID, c.ID+"-replay-") {
			replays = append(replays, r)
		}
	}
	if len(replays) != len(cases) {
		t.Fatalf("%d replays ran, want %d", len(replays), len(cases))
	}
	first := history.Trace(replays[0].Timeline)
	reproduced := 0
	for i, r := range replays {
		if err := back.JudgeResult(r); err != nil {
			t.Errorf("replay %d of %s (%s@%d): %v", i+1, hit.Case.ID, p, k, err)
			continue
		}
		reproduced++
		if tr := history.Trace(r.Timeline); !slices.Equal(tr, first) {
			t.Errorf("replay %d's history differs from replay 1's:\n%s\nvs\n%s", i+1, strings.Join(tr, "\n"), strings.Join(first, "\n"))
		}
	}
	t.Logf("%s (a crash at %s@%d) broke %v; %d of 10 replays of its scenario broke it again", hit.Case.ID, p, k, hit.Broken(), reproduced)
}
