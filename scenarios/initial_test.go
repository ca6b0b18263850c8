package scenarios

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/initial"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// killedAt runs the standard script in one worker process that is killed
// by SIGKILL at point, with no recovery after it, and returns the state
// its SQLite file holds (read read-only) and the operation left unfinished.
func killedAt(t *testing.T, point faults.Point) *initial.State {
	t.Helper()
	r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1,
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}})
	if err != nil {
		t.Fatal(err)
	}
	c := catalogue.Case{ID: "incident", System: faults.Ingestion, Steps: []catalogue.Step{{Worker: "fault", Actions: catalogue.StandardScript(),
		Arms: faults.Arms{point: {Kind: faults.Crash, Hit: 1}}, ExpectHit: []faults.Point{point}}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := r.RunCase(ctx, c)
	if w := res.Workers; len(w) != 1 || !strings.HasPrefix(w[0].Exit, "killed") {
		t.Fatalf("the worker was not killed at %s: %+v %v", point, w, res.Notes)
	}
	st, err := sqlite.OpenReadOnly(filepath.Join(res.Dir, "data", "crashmatrix.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, notes, err := initial.Read(ctx, st, res.Space, initial.Filter{}, time.Now().UnixMilli())
	if err != nil || len(notes) > 0 {
		t.Fatal(err, notes)
	}
	if len(s.Unfinished()) != 1 {
		t.Fatalf("want one operation stuck, got %v", s.Unfinished())
	}
	return s
}

func replay(t *testing.T, s *Scenario, inProcess bool) verdict.CaseResult {
	t.Helper()
	r, err := sim.NewRunner(s.Apply(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1, InProcess: inProcess,
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.CloseShared()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return r.RunCase(ctx, s.Case())
}

// A worker killed at a window leaves an operation stuck; the scenario made
// from the store's state (written and read back) replays in both execution
// modes, recovery finishes the operation, and every invariant holds. The
// same state with an edge no ACTIVE document supports replays as a
// failing scenario naming I3.
func TestInitialStateFromAKilledWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real worker processes")
	}
	st := killedAt(t, faults.BeforeGraphApplied)
	stuck := st.Unfinished()[0]
	sc := FromState("incident-before-graph-applied", "a worker killed after its graph write, before PREPARED -> GRAPH_APPLIED", st)
	b, err := sc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("incident.yaml", b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(back.Initial, st) {
		t.Fatal("the initial block does not read back to the state it was written from")
	}
	for _, inProcess := range []bool{false, true} {
		res := replay(t, back, inProcess)
		if err := back.JudgeResult(res); err != nil {
			t.Fatalf("in-process=%v: %v (notes %v, violations %v)", inProcess, err, res.Notes, res.Violations)
		}
		done := false
		for _, rec := range res.Timeline {
			if rec.Event != nil && rec.Event.OperationID == sim.OpID(res.Space, stuck) && rec.Event.Kind == reference.EvStage && rec.Event.To == reference.Completed {
				done = true
			}
		}
		if !done {
			t.Fatalf("in-process=%v: recovery never completed the stuck operation %s", inProcess, stuck)
		}
	}

	broken := *st
	n := st.Graph.Nodes
	broken.Graph.Edges = append(slices.Clone(st.Graph.Edges), reference.Edge{Key: reference.EdgeKey{Source: n[0].ID, Type: "ORPHANED", Target: n[1].ID}})
	bad := FromState("incident-orphan-edge", "an edge no ACTIVE document supports", &broken)
	res := replay(t, bad, true)
	err = bad.JudgeResult(res)
	if res.Verdict != verdict.Fail || !slices.Equal(res.Broken(), []string{"I3"}) || err == nil || !strings.Contains(err.Error(), "broke I3") {
		t.Fatalf("the orphan edge replayed as %s %v (judge: %v)", res.Verdict, res.Broken(), err)
	}
}

// The initial block is decoded strictly and checked against the
// protocol's rules; each problem names its line, column and field path.
func TestInitialBlockErrors(t *testing.T) {
	base := `name: x
steps:
  - worker: quiesce
    actions: [{do: recover}]
expect: {verdict: pass}
initial:
  space: prod
  at: 1790000000000
`
	op := func(extra string) string {
		p := reference.Plan{Kind: reference.Retraction, OperationID: "op1", Space: "prod", DocumentID: "d1",
			Mutation: reference.Mutation{OperationID: "op1"}, PreviousState: &reference.DocumentState{Space: "prod", DocumentID: "d1", Revision: 1, OperationID: "op0", Status: reference.DocActive},
			NextState: &reference.DocumentState{Space: "prod", DocumentID: "d1", Revision: 2, OperationID: "op1", Status: reference.DocRetracted}}
		return `  operations:
    - id: op1
      document: d1
      expectedRevision: 1
      fingerprint: ` + reference.Fingerprint(p) + `
      stage: GRAPH_APPLIED
      updatedAt: 1789999999000
` + extra + `      plan:
        kind: RETRACTION
        operationId: op1
        space: prod
        documentId: d1
        options: {space: ""}
        mutation: {operationId: op1}
        previousState: {space: prod, documentId: d1, revision: 1, operationId: op0, contentHash: "", extractionFingerprint: "", status: ACTIVE, factSources: [], nodeIds: [], committedAt: 0}
        nextState: {space: prod, documentId: d1, revision: 2, operationId: op1, contentHash: "", extractionFingerprint: "", status: RETRACTED, factSources: [], nodeIds: [], committedAt: 0}
`
	}
	if _, err := Parse("ok.yaml", []byte(base+op(""))); err != nil {
		t.Fatalf("a valid initial block was refused: %v", err)
	}
	cases := []struct{ name, text, want string }{
		{"unknown field", base + op("      owner: bob\n"), `x.yaml:16:7: initial.operations[0].owner: unknown field "owner"`},
		{"wrong type", base + op("      attempts: many\n"), `x.yaml:16:17: initial.operations[0].attempts:`},
		{"illegal stage", strings.Replace(base+op(""), "GRAPH_APPLIED", "APPLIED", 1), `x.yaml:14:14: initial.operations[0].stage: unknown stage "APPLIED"`},
		{"edited plan", strings.Replace(base+op(""), "status: RETRACTED", "status: ACTIVE", 1), `x.yaml:13:20: initial.operations[0].fingerprint: the plan hashes to`},
		{"dangling edge", base + "  graph:\n    edges:\n      - key: {source: a, type: T, target: b, rank: 0}\n",
			`x.yaml:11:23: initial.graph.edges[0].key.source: node "a" is not in graph.nodes`},
		{"anchor", base + "  leases: &l []\n", `x.yaml:9:11: initial.leases: anchors, aliases, tags and merge keys are not supported`},
		{"memory backend", "backend: memory\n" + base, `x.yaml:7:1: initial: backend memory is volatile`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(c.text))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing\n  %s\ngot\n  %v", c.want, err)
			}
		})
	}
}

// A model call for an operation loaded with a frozen plan is a call after
// the freeze: the recall-model-on-resume mutant breaks I1 from the
// incident's state, in both modes (the run's call log starts with the
// loaded plans' extractionCall).
func TestInitialStateCatchesAModelRecall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real worker processes")
	}
	s, err := Load("library/incident-stuck-graph-applied.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s.Bugs = []reference.Bug{reference.BugRecallModelOnResume}
	for _, inProcess := range []bool{false, true} {
		res := replay(t, s, inProcess)
		if !slices.Contains(res.Broken(), "I1") {
			t.Fatalf("in-process=%v: the mutant recalled the model for a loaded operation and I1 held (%s %v, notes %v)", inProcess, res.Verdict, res.Broken(), res.Notes)
		}
	}
}
