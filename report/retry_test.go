package report

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim"
	_ "github.com/crashmatrix/crashmatrix/sim/embedded" // the sqlite backend
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
	c := sim.Case{ID: "never-fires", System: faults.Ingestion, Class: "never-fires", Description: "expects a failpoint nothing arms",
		Steps: []sim.Step{{Worker: "fault", Actions: sim.StandardScript(), ExpectHit: []faults.Point{faults.BeforeCompleted}}}}
	rep := r.RunAll(context.Background(), []sim.Case{c}, 1, nil)
	res := rep.Results[0]
	if res.Verdict != sim.NotExercised {
		t.Fatalf("verdict %s, want not exercised (notes %q)", res.Verdict, res.Notes)
	}
	var retried []string
	for _, n := range res.Notes {
		if strings.HasPrefix(n, sim.EarlierAttempts) {
			retried = append(retried, n)
		}
	}
	if len(retried) != 1 {
		t.Fatalf("want one note on the earlier attempts, got %q", res.Notes)
	}
	if n := retried[0]; strings.Count(n, "attempt 1:") != 1 || strings.Count(n, "attempt 2:") != 1 || strings.Count(n, sim.EarlierAttempts) != 1 {
		t.Errorf("earlier attempts nest or repeat: %q", n)
	}
	d := Summarize(rep, Options{})
	if len(d.NotExercised) != 1 || d.NotExercised[0].Why != "failpoint beforeCompleted never fired in worker fault, which can mean the code path changed" {
		t.Errorf("not exercised: %+v", d.NotExercised)
	}
	if !strings.HasPrefix(d.Headline, "NOT CERTIFIED: 1 not exercised (never-fires)") {
		t.Errorf("headline %q", d.Headline)
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
