package initial_test

import (
	"context"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/initial"
)

const t0 = int64(1_790_000_000_000)

// stuck leaves space in st as a worker killed at a window leaves it: d4
// and d1 committed, d2's graph written and the worker dead before
// PREPARED -> GRAPH_APPLIED (its lease still held), nothing recovered.
func stuck(t *testing.T, st reference.Stores, space string, point faults.Point) {
	t.Helper()
	now := t0
	svc := &reference.Service{Stores: st, Extractor: &reference.FakeExtractor{Log: &reference.MemoryCallLog{}}, Holder: "worker/41",
		LeaseTTL: 5 * time.Second, Now: func() int64 { now += 3; return now }, Sleep: func(context.Context, time.Duration) error { return nil }}
	ctx := context.Background()
	for _, d := range []struct{ doc, content string }{{"d4", catalogue.DocD4}, {"d1", catalogue.DocD1v1}} {
		if _, err := svc.Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: d.doc, OperationID: space + "/" + d.doc, Content: d.content}); err != nil {
			t.Fatal(err)
		}
	}
	sched := faults.NewSchedule()
	sched.Arm(point, faults.Action{Kind: faults.Crash, Hit: 1})
	died := make(chan bool)
	svc.Faults = &faults.Runtime{Injector: sched, Crash: func(faults.Hit) { died <- true; runtime.Goexit() }}
	go func() {
		_, err := svc.Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: "d2", OperationID: space + "/d2", Content: catalogue.DocD2})
		t.Errorf("the ingestion of d2 returned (%v) instead of dying at %s", err, point)
		died <- false
	}()
	if !<-died {
		t.FailNow()
	}
}

// readStuck reads the whole space a stuck run left.
func readStuck(t *testing.T) *initial.State {
	t.Helper()
	src := openSQLite(t, "src")
	stuck(t, src, "prod", faults.BeforeGraphApplied)
	s, _, err := initial.Read(context.Background(), src, "prod", initial.Filter{}, t0+1000)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openSQLite(t *testing.T, name string) reference.Stores {
	st, err := sqlite.OpenMemory(strings.ReplaceAll(t.Name(), "/", "_")+"-"+name, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestReadLoadReadIsIdentity: a state read from one store, loaded into an
// empty one (SQLite and memory) and read back is the same state, down to
// stages, fingerprints, lease tokens and times.
func TestReadLoadReadIsIdentity(t *testing.T) {
	ctx := context.Background()
	src := openSQLite(t, "src")
	stuck(t, src, "prod", faults.BeforeGraphApplied)
	s, notes, err := initial.Read(ctx, src, "prod", initial.Filter{}, t0+1000)
	if err != nil || len(notes) > 0 {
		t.Fatal(err, notes)
	}
	if ps := s.Validate(); len(ps) > 0 {
		t.Fatalf("a state read from a store is invalid: %v", ps)
	}
	var d2 *initial.Operation
	for i := range s.Operations {
		if s.Operations[i].Document == "d2" {
			d2 = &s.Operations[i]
		}
	}
	if d2 == nil || d2.ID != "d2" || d2.Stage != reference.Prepared || len(s.Operations) != 3 || len(s.Leases) != 3 || len(s.Graph.Edges) == 0 {
		t.Fatalf("state does not show the stuck d2 (unscoped id d2, PREPARED) among 3 operations and 3 leases: %+v", s)
	}
	for name, dst := range map[string]reference.Stores{"sqlite": openSQLite(t, "dst"), "memory": memory.New(memory.Options{})} {
		t.Run(name, func(t *testing.T) {
			if err := initial.Load(ctx, dst, s, initial.Target{Space: "prod", Now: s.At}); err != nil {
				t.Fatal(err)
			}
			back, _, err := initial.Read(ctx, dst, "prod", initial.Filter{}, s.At)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, s) {
				t.Fatalf("read back differs:\n got  %+v\n want %+v", back, s)
			}
		})
	}
}

// TestLoadRenamesAndShifts: loading into another space scopes every
// operationId, recomputes fingerprints for the renamed plans and moves
// every time by the same amount; a second load into the same space is
// refused (the operationIds exist).
func TestLoadRenamesAndShifts(t *testing.T) {
	ctx := context.Background()
	s := readStuck(t)
	dst := openSQLite(t, "dst")
	shift := int64(500_000)
	tg := initial.Target{Space: "run-7", OpID: func(id string) string { return "run-7/" + id }, Now: s.At + shift}
	if err := initial.Load(ctx, dst, s, tg); err != nil {
		t.Fatal(err)
	}
	op, err := dst.Ops.Get(ctx, "run-7/d2")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := dst.Ops.GetPlan(ctx, "run-7/d2")
	if err != nil {
		t.Fatal(err)
	}
	var want initial.Operation
	for _, o := range s.Operations {
		if o.ID == "d2" {
			want = o
		}
	}
	if op.Stage != reference.Prepared || op.Space != "run-7" || op.UpdatedAt != want.UpdatedAt+shift || op.PlanFingerprint != reference.Fingerprint(plan) || plan.NextState.OperationID != "run-7/d2" {
		t.Fatalf("loaded operation %+v (plan next state %+v), want PREPARED in run-7 at %d", op, plan.NextState, want.UpdatedAt+shift)
	}
	cur, ok, err := dst.States.FindCurrent(ctx, "run-7", "d1")
	if err != nil || !ok || cur.OperationID != "run-7/d1" || cur.Revision != 1 {
		t.Fatalf("d1's current state %+v %v %v", cur, ok, err)
	}
	l, got, err := dst.Locks.TryAcquire(ctx, "run-7", "d2", "someone", tg.Now, 10)
	if err != nil || got || !strings.HasPrefix(l.Holder, "worker/41") {
		t.Fatalf("d2's lease, held by the dead worker until after the snapshot, was free or held by another: %+v %v %v", l, got, err)
	}
	if err := initial.Load(ctx, dst, s, tg); err == nil || !strings.Contains(err.Error(), "is the target space empty") {
		t.Fatalf("loading twice into one space: %v", err)
	}
}

// TestValidateRejectsWhatNoStoreHolds: every state a correct store cannot
// hold is named with its field path; an invariant-breaking one is valid.
func TestValidateRejectsWhatNoStoreHolds(t *testing.T) {
	ctx := context.Background()
	src := openSQLite(t, "src")
	stuck(t, src, "prod", faults.BeforeGraphApplied)
	base, _, err := initial.Read(ctx, src, "prod", initial.Filter{}, t0+1000)
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() *initial.State {
		s, _, _ := initial.Read(ctx, src, "prod", initial.Filter{}, t0+1000)
		return s
	}
	cases := []struct {
		name, path, msg string
		edit            func(s *initial.State)
	}{
		{"edited plan", "operations[0].fingerprint", "the plan hashes to", func(s *initial.State) { s.Operations[0].Plan.Content += "Person:Zed\n" }},
		{"unknown stage", "operations[1].stage", `unknown stage "GRAPH_DONE"`, func(s *initial.State) { s.Operations[1].Stage = "GRAPH_DONE" }},
		{"completed dead letter", "operations[0].disposition", "both are terminal", func(s *initial.State) {
			s.Operations[0].Stage, s.Operations[0].Disposition = reference.Completed, reference.DeadLetter
		}},
		{"expected revision", "operations[0].expectedRevision", "plan was made against revision 0", func(s *initial.State) { s.Operations[0].ExpectedRevision = 3 }},
		{"name bound twice", "registry[1].names[0]", "already bound to node", func(s *initial.State) {
			s.Registry[1].Type, s.Registry[1].Names = s.Registry[0].Type, append([]string(nil), s.Registry[0].Names...)
			s.Registry[1].CanonicalName = s.Registry[0].CanonicalName
		}},
		{"dangling edge", "graph.edges[0].key.source", "never stores an edge without its endpoints", func(s *initial.State) { s.Graph.Edges[0].Key.Source = "person:nobody" }},
		{"token 0", "leases[0].token", "tokens start at 1", func(s *initial.State) { s.Leases[0].Token = 0 }},
		{"versions out of order", "documents[0].versions[1].revision", "ascending", func(s *initial.State) {
			s.Documents[0].Versions = append(s.Documents[0].Versions, s.Documents[0].Versions[0])
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fresh()
			c.edit(s)
			ps := s.Validate()
			for _, p := range ps {
				if p.Path == c.path && strings.Contains(p.Msg, c.msg) {
					return
				}
			}
			t.Fatalf("want a problem at %s containing %q, got %v", c.path, c.msg, ps)
		})
	}
	// An unreconciled edge (no ACTIVE document supports it) breaks I3, but
	// a store can hold it: valid.
	s := fresh()
	s.Graph.Edges = append(s.Graph.Edges, reference.Edge{Key: reference.EdgeKey{Source: s.Graph.Nodes[0].ID, Type: "ORPHAN", Target: s.Graph.Nodes[1].ID}})
	if ps := s.Validate(); len(ps) > 0 {
		t.Fatalf("an invariant-breaking but storable state was refused: %v", ps)
	}
	if ps := base.Validate(); len(ps) > 0 {
		t.Fatal(ps)
	}
}

// TestReadFilters: a document filter keeps that document and the ACTIVE
// documents sharing its nodes and edges; an operation filter keeps one
// operation.
func TestReadFilters(t *testing.T) {
	ctx := context.Background()
	src := openSQLite(t, "src")
	stuck(t, src, "prod", faults.BeforeGraphApplied)
	byDoc, _, err := initial.Read(ctx, src, "prod", initial.Filter{Document: "d4"}, t0+1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(byDoc.Documents) != 1 || byDoc.Documents[0].ID != "d4" || len(byDoc.Operations) != 1 || len(byDoc.Graph.Edges) != 2 {
		t.Fatalf("d4 shares nothing with d1 and d2; got %+v", byDoc)
	}
	// d2 (stuck, not committed) wrote Bob -WORKS_AT-> Acme, which d1
	// supports: d1 comes along.
	byOp, _, err := initial.Read(ctx, src, "prod", initial.Filter{Operation: "d2"}, t0+1000)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, d := range byOp.Documents {
		docs = append(docs, d.ID)
	}
	if len(byOp.Operations) != 1 || byOp.Operations[0].ID != "d2" || strings.Join(docs, ",") != "d1" {
		t.Fatalf("operation d2: operations %+v, documents %v", byOp.Operations, docs)
	}
	if _, _, err := initial.Read(ctx, src, "prod", initial.Filter{Operation: "nope"}, t0); err == nil {
		t.Fatal("an unknown operation was accepted")
	}
}

// TestRedact: the same text becomes the same replacement, keys stay, the
// fingerprints are those of the redacted plans, and the redacted state
// loads and checks like the original.
func TestRedact(t *testing.T) {
	ctx := context.Background()
	s := readStuck(t)
	r1, r2 := initial.Redact(s, "k"), initial.Redact(s, "k")
	if !reflect.DeepEqual(r1, r2) {
		t.Fatal("redaction is not deterministic")
	}
	if reflect.DeepEqual(initial.Redact(s, "other"), r1) {
		t.Fatal("the salt does not change the replacements")
	}
	if ps := r1.Validate(); len(ps) > 0 {
		t.Fatalf("redacted state invalid: %v", ps)
	}
	for _, e := range r1.Registry {
		if strings.Contains(strings.ToLower(e.CanonicalName), "alice") || strings.Contains(strings.ToLower(e.CanonicalName), "acme") {
			t.Fatalf("business text survived: %+v", e)
		}
	}
	for _, op := range r1.Operations {
		if strings.Contains(op.Plan.Content, "Person") {
			t.Fatalf("content survived: %q", op.Plan.Content)
		}
	}
	if len(r1.Graph.Nodes) != len(s.Graph.Nodes) || r1.Graph.Nodes[0].ID != s.Graph.Nodes[0].ID || r1.Leases[0] != s.Leases[0] {
		t.Fatal("redaction changed keys")
	}
	dst := openSQLite(t, "dst")
	if err := initial.Load(ctx, dst, r1, initial.Target{Space: "prod", Now: r1.At}); err != nil {
		t.Fatal(err)
	}
	snap, err := check.Take(ctx, dst, "prod", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := check.CheckI6(snap, check.Observed{}); len(v) > 0 {
		t.Fatalf("the redacted registry no longer matches the graph: %v", v)
	}
}
