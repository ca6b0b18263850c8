package reference_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
)

var ctx = context.Background()

func req1(op string) reference.IngestRequest {
	return reference.IngestRequest{Space: space, DocumentID: docID, OperationID: op, Content: doc1}
}

// eventLog records a service's events.
type eventLog struct {
	mu sync.Mutex
	ev []reference.Event
}

func (l *eventLog) Observe(e reference.Event) { l.mu.Lock(); l.ev = append(l.ev, e); l.mu.Unlock() }

func (l *eventLog) kinds(kind string) []reference.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []reference.Event
	for _, e := range l.ev {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// checkConverged asserts the end state of a single-document ingestion of
// doc1 under op: COMPLETED, one model call, one version, graph as without
// faults, nothing left to recover.
func checkConverged(t *testing.T, w *world, op string, want reference.Graph) {
	t.Helper()
	if p := convergenceProblem(t, w, op, want); p != "" {
		t.Fatal(p)
	}
}

func convergenceProblem(t *testing.T, w *world, op string, want reference.Graph) string {
	t.Helper()
	o := w.op(t, op)
	if o.Stage != reference.Completed || o.Disposition != reference.Active {
		return fmt.Sprintf("operation %s ended %s/%s (%s)", op, o.Stage, o.Disposition, o.FailureReason)
	}
	if n := w.log.Calls(op); n != 1 {
		return fmt.Sprintf("model called %d times for %s, want 1", n, op)
	}
	vs := w.versions(t, docID)
	if len(vs) != 1 || vs[0].Revision != 1 || vs[0].OperationID != op {
		return fmt.Sprintf("versions %+v, want exactly revision 1 by %s", vs, op)
	}
	st, ok := w.current(t, docID)
	if !ok || st.Revision != 1 || st.OperationID != op || st.Status != reference.DocActive {
		return fmt.Sprintf("current state %+v %v", st, ok)
	}
	if got := w.graph(t); !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("graph differs from the fault-free run:\n got nodes %v edges %v\nwant nodes %v edges %v",
			got.SortedNodes(), got.SortedEdges(), want.SortedNodes(), want.SortedEdges())
	}
	regs, err := w.stores.Registry.List(ctx, space)
	must(t, err)
	if len(regs) != 5 {
		return fmt.Sprintf("registry has %d entities, want 5", len(regs))
	}
	rec, err := w.stores.Ops.ListRecoverable(ctx, 10)
	must(t, err)
	if len(rec) != 0 {
		return fmt.Sprintf("recoverable operations left: %+v", rec)
	}
	return ""
}

func TestIngestHappyPath(t *testing.T) {
	w := newWorld()
	s := w.service()
	events := &eventLog{}
	s.Observer = events
	res, err := s.Ingest(ctx, req1("op-1"))
	must(t, err)
	// 5 nodes + 3 edges in batches of 2.
	if res.Outcome != reference.OutcomeCompleted || res.Revision != 1 || res.OperationID != "op-1" || res.Writes != 4 || w.writer.Calls() != 4 {
		t.Fatalf("result %+v, writer calls %d", res, w.writer.Calls())
	}
	plan, err := w.stores.Ops.GetPlan(ctx, "op-1")
	must(t, err)
	if plan.Kind != reference.Ingestion || plan.ExpectedRevision() != 0 || plan.NextState.Revision != 1 || plan.Content != doc1 || plan.ExtractionCall != 1 {
		t.Fatalf("plan %+v", plan)
	}
	// The graph is the fold of the plan.
	want := reference.NewGraph()
	must(t, want.Apply(plan.Mutation))
	sameGraph(t, w.graph(t), want)
	// Node ids follow NodeID; the relation is there.
	lin, org := reference.NodeID("Character", "林默"), reference.NodeID("Organization", "青云会")
	g := w.graph(t)
	if n, ok := g.Nodes[lin]; !ok || n.Label != "Character" || n.Properties["name"] != "林默" || n.Properties["level"] != "3" {
		t.Fatalf("node 林默: %+v", n)
	}
	member := reference.EdgeKey{Source: lin, Type: "MEMBER_OF", Target: org}
	if _, ok := g.Edges[member]; !ok {
		t.Fatalf("edge %s missing", member)
	}
	st, _ := w.current(t, docID)
	if !st.Supports(member) || len(st.FactSources) != 3 || len(st.NodeIDs) != 5 || st.ContentHash != reference.ContentHash(doc1) || st.ExtractionFingerprint != reference.FakeModel {
		t.Fatalf("state %+v", st)
	}
	// The alias resolves to the same node in the registry.
	hits, err := w.stores.Registry.FindMatches(ctx, space, "character", []string{"小默"})
	must(t, err)
	if len(hits) != 1 || hits[0].NodeID != lin {
		t.Fatalf("alias lookup: %+v", hits)
	}
	// I4: the observed stages follow the machine.
	var path []string
	for _, e := range events.kinds(reference.EvStage) {
		path = append(path, string(e.From)+">"+string(e.To))
	}
	if got := strings.Join(path, " "); got != "PREPARED>GRAPH_APPLIED GRAPH_APPLIED>STATE_COMMITTED STATE_COMMITTED>COMPLETED" {
		t.Fatalf("stage events: %s", got)
	}
	if len(events.kinds(reference.EvModelCall)) != 1 || len(events.kinds(reference.EvPrepared)) != 1 || len(events.kinds(reference.EvStateCommit)) != 1 {
		t.Fatal("model-call/prepared/state-commit events not exactly once")
	}
	checkConverged(t, w, "op-1", want)
}

func TestIngestDerivesOperationID(t *testing.T) {
	w := newWorld()
	res, err := w.service().Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: docID, Content: doc1})
	must(t, err)
	if want := reference.IngestOperationID(space, docID, reference.ContentHash(doc1), 0); res.OperationID != want {
		t.Fatalf("operationId %s, want %s", res.OperationID, want)
	}
	// Duplicate delivery without an id after the commit: the derived id
	// builds on revision 1 now, and nothing changed, so NO_OP without a
	// model call.
	res2, err := w.service().Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: docID, Content: doc1})
	must(t, err)
	if res2.Outcome != reference.OutcomeNoOp || w.log.Calls(res.OperationID) != 1 || w.log.Calls(res2.OperationID) != 0 {
		t.Fatalf("duplicate delivery: %+v, calls %d/%d", res2, w.log.Calls(res.OperationID), w.log.Calls(res2.OperationID))
	}
}

// Java: writerExceptionShouldBeRecoverableWithoutReextracting.
func TestWriterExceptionShouldBeRecoverableWithoutReextracting(t *testing.T) {
	want := baseline(t, req1("op-1"))
	w := newWorld()
	w.batch = 100
	s := w.service()
	w.writer.throwNext.Store(true)
	_, err := s.Ingest(ctx, req1("op-1"))
	if err == nil || !strings.Contains(err.Error(), "writer") {
		t.Fatalf("ingest error %v, want the writer failure", err)
	}
	op := w.op(t, "op-1")
	if op.Stage != reference.Failed || op.Attempts != 1 || !strings.Contains(op.FailureReason, "synthetic writer failure") || op.Disposition != reference.Active {
		t.Fatalf("after writer failure: %+v", op)
	}
	if _, ok := w.current(t, docID); ok {
		t.Fatal("document state committed after a writer failure")
	}
	res, err := w.service().Resume(ctx, "op-1")
	must(t, err)
	if res.Outcome != reference.OutcomeCompleted || res.Revision != 1 {
		t.Fatalf("resume: %+v", res)
	}
	if w.writer.Calls() != 2 {
		t.Fatalf("writer calls %d, want 2", w.writer.Calls())
	}
	checkConverged(t, w, "op-1", want)
	if w.op(t, "op-1").Attempts != 1 {
		t.Fatal("attempt count lost")
	}
}

func TestInjectedTransientWriterErrorThenResume(t *testing.T) {
	want := baseline(t, req1("op-1"))
	w := newWorld()
	w.sched.Arm(faults.BeforeGraphWrite, faults.Action{Kind: faults.Transient, Hit: 1})
	_, err := w.service().Ingest(ctx, req1("op-1"))
	var ie *faults.InjectedError
	if !errors.As(err, &ie) || !ie.Retryable || ie.Point != faults.BeforeGraphWrite || !reference.IsRetryable(err) {
		t.Fatalf("ingest error %v, want the transient injected fault", err)
	}
	if op := w.op(t, "op-1"); op.Stage != reference.Failed || op.Attempts != 1 {
		t.Fatalf("after transient fault: %+v", op)
	}
	if w.writer.Calls() != 0 {
		t.Fatal("writer called despite the fault before it")
	}
	res, err := w.service().Resume(ctx, "op-1")
	must(t, err)
	if res.Outcome != reference.OutcomeCompleted {
		t.Fatalf("resume: %+v", res)
	}
	checkConverged(t, w, "op-1", want)
}

// Java: graphAppliedJournalFailureShouldReplayIdempotentMutation.
func TestGraphAppliedJournalFailureShouldReplayIdempotentMutation(t *testing.T) {
	want := baseline(t, req1("op-1"))
	w := newWorld()
	w.batch = 100
	s := w.service()
	w.ops.casFalse[reference.GraphApplied] = true
	_, err := s.Ingest(ctx, req1("op-1"))
	if err == nil || !strings.Contains(err.Error(), "changed concurrently") {
		t.Fatalf("ingest error %v", err)
	}
	if w.writer.Calls() != 1 || w.op(t, "op-1").Stage != reference.Prepared {
		t.Fatalf("writer %d, stage %s", w.writer.Calls(), w.op(t, "op-1").Stage)
	}
	_, err = w.service().Resume(ctx, "op-1")
	must(t, err)
	if w.writer.Calls() != 2 {
		t.Fatalf("writer calls %d, want 2 (replay)", w.writer.Calls())
	}
	checkConverged(t, w, "op-1", want)
}

// Java: registryFailureShouldResumeAfterGraphApplied.
func TestRegistryFailureShouldResumeAfterGraphApplied(t *testing.T) {
	want := baseline(t, req1("op-1"))
	w := newWorld()
	w.batch = 100
	s := w.service()
	w.reg.failNext.Store(true)
	_, err := s.Ingest(ctx, req1("op-1"))
	if err == nil || !strings.Contains(err.Error(), "registry") {
		t.Fatalf("ingest error %v", err)
	}
	op := w.op(t, "op-1")
	if op.Stage != reference.GraphApplied || op.Attempts != 1 || op.Disposition != reference.Active {
		t.Fatalf("after registry failure: %+v", op)
	}
	if _, ok := w.current(t, docID); ok {
		t.Fatal("state committed")
	}
	_, err = w.service().Resume(ctx, "op-1")
	must(t, err)
	if w.writer.Calls() != 1 || w.reg.saves.Load() != 2 {
		t.Fatalf("writer %d (want 1), registry saves %d (want 2)", w.writer.Calls(), w.reg.saves.Load())
	}
	checkConverged(t, w, "op-1", want)
}

// Java: transientStateCasFailureShouldResumeWithoutGraphReplay. A revision
// CAS that reports false while the current revision still equals the
// expected one is not a lost race ("if a competing version won, abandon"):
// the operation must stay GRAPH_APPLIED and a resume must finish it
// without replaying the graph or asking the model again.
func TestTransientStateCasFailureShouldResumeWithoutGraphReplay(t *testing.T) {
	want := baseline(t, req1("op-1"))
	w := newWorld()
	w.batch = 100
	s := w.service()
	w.states.casFalse.Store(true)
	_, err := s.Ingest(ctx, req1("op-1"))
	if err == nil {
		t.Fatalf("ingest succeeded after a failed revision CAS with no competing revision (calls: %d model calls in total)", totalCalls(t, w))
	}
	if op := w.op(t, "op-1"); op.Stage != reference.GraphApplied || op.Disposition != reference.Active {
		t.Fatalf("after the CAS failure: %+v", op)
	}
	_, err = w.service().Resume(ctx, "op-1")
	must(t, err)
	if w.writer.Calls() != 1 {
		t.Fatalf("writer calls %d, want 1", w.writer.Calls())
	}
	checkConverged(t, w, "op-1", want)
}

func totalCalls(t *testing.T, w *world) int {
	ops, err := w.stores.Ops.List(ctx)
	must(t, err)
	n := 0
	for _, o := range ops {
		n += w.log.Calls(o.OperationID)
	}
	return n
}

// Java: historyFailureShouldCompleteFromAlreadyCommittedState.
func TestHistoryFailureShouldCompleteFromAlreadyCommittedState(t *testing.T) {
	want := baseline(t, req1("op-1"))
	w := newWorld()
	w.batch = 100
	s := w.service()
	w.states.failRecord.Store(true)
	_, err := s.Ingest(ctx, req1("op-1"))
	if err == nil || !strings.Contains(err.Error(), "history") {
		t.Fatalf("ingest error %v", err)
	}
	if _, ok := w.current(t, docID); !ok {
		t.Fatal("state not committed")
	}
	if vs := w.versions(t, docID); len(vs) != 0 {
		t.Fatalf("versions %+v, want none yet", vs)
	}
	if op := w.op(t, "op-1"); op.Stage != reference.GraphApplied {
		t.Fatalf("stage %s", op.Stage)
	}
	_, err = w.service().Resume(ctx, "op-1")
	must(t, err)
	if w.writer.Calls() != 1 {
		t.Fatalf("writer calls %d", w.writer.Calls())
	}
	checkConverged(t, w, "op-1", want)
}

// Java: stateCommittedJournalFailureShouldOnlyRepairOperationLog.
func TestStateCommittedJournalFailureShouldOnlyRepairOperationLog(t *testing.T) {
	want := baseline(t, req1("op-1"))
	w := newWorld()
	w.batch = 100
	s := w.service()
	w.ops.casFalse[reference.StateCommitted] = true
	_, err := s.Ingest(ctx, req1("op-1"))
	if err == nil || !strings.Contains(err.Error(), "changed concurrently") {
		t.Fatalf("ingest error %v", err)
	}
	if _, ok := w.current(t, docID); !ok || w.op(t, "op-1").Stage != reference.GraphApplied {
		t.Fatal("want state committed, stage GRAPH_APPLIED")
	}
	_, err = w.service().Resume(ctx, "op-1")
	must(t, err)
	if w.writer.Calls() != 1 {
		t.Fatalf("writer calls %d", w.writer.Calls())
	}
	checkConverged(t, w, "op-1", want)
}

// Java: preparedPlanShouldResumeAfterServiceRestart.
func TestPreparedPlanShouldResumeAfterServiceRestart(t *testing.T) {
	want := baseline(t, req1("op-1"))
	w := newWorld()
	s := w.service()
	plan, err := s.Plan(ctx, req1("op-1"))
	must(t, err)
	ok, err := w.stores.Ops.CreateIfAbsent(ctx, reference.NewOperation(plan, 10), plan)
	must(t, err)
	if !ok {
		t.Fatal("create failed")
	}
	res, err := w.restart().Resume(ctx, "op-1")
	must(t, err)
	if res.Outcome != reference.OutcomeCompleted || w.writer.Calls() != 4 {
		t.Fatalf("resume %+v, writer %d", res, w.writer.Calls())
	}
	checkConverged(t, w, "op-1", want)
}

// A crash (process death) in every window of the ingestion, then a new
// service instance resumes: COMPLETED, one model call, the graph of a
// fault-free run, one version.
func TestCrashWindowsConverge(t *testing.T) {
	want := baseline(t, req1("op-1"))
	type tc struct {
		point faults.Point
		kind  faults.Kind
		hit   int
	}
	var cases []tc
	for _, p := range []faults.Point{faults.BeforeGraphWrite, faults.BetweenGraphBatches, faults.BeforeGraphApplied, faults.BeforeRegistrySave,
		faults.BeforeStateCommit, faults.BeforeRecordVersion, faults.BeforeStateCommitted, faults.BeforeCompleted, faults.BeforeLeaseCheck} {
		cases = append(cases, tc{p, faults.Crash, 1})
		cases = append(cases, tc{p, faults.Unknown, 1})
	}
	cases = append(cases, tc{faults.BetweenGraphBatches, faults.Crash, 2}, tc{faults.BetweenGraphBatches, faults.Crash, 3})
	for _, c := range cases {
		for _, via := range []string{"resume", "recovery", "resubmit"} {
			name := string(c.point) + "/" + string(c.kind) + "@" + string(rune('0'+c.hit)) + "/" + via
			t.Run(name, func(t *testing.T) {
				w := newWorld()
				w.sched.Arm(c.point, faults.Action{Kind: c.kind, Hit: c.hit})
				hit := runUntilCrash(func() { _, _ = w.service().Ingest(ctx, req1("op-1")) })
				if hit == nil || hit.Point != c.point {
					t.Fatalf("no crash at %s (hit %v)", c.point, hit)
				}
				if c.point == faults.BetweenGraphBatches {
					wantCalls := c.hit
					if c.kind == faults.Unknown {
						wantCalls++ // the batch after the point committed
					}
					if got := w.writer.Calls(); got != wantCalls {
						t.Fatalf("writer calls before the crash %d, want %d", got, wantCalls)
					}
				}
				// An unknown fault at BeforeCompleted committed the last
				// step: there is nothing left to do.
				done := c.point == faults.BeforeCompleted && c.kind == faults.Unknown
				wantOutcome, wantRounds := reference.OutcomeCompleted, 2
				if done {
					wantOutcome, wantRounds = reference.OutcomeAlreadyDone, 1
				}
				s := w.restart()
				switch via {
				case "resume":
					res, err := s.Resume(ctx, "op-1")
					must(t, err)
					if res.Outcome != wantOutcome || res.Revision != 1 {
						t.Fatalf("resume: %+v", res)
					}
				case "recovery":
					r := &reference.Recovery{Service: s, Sleep: func(context.Context, time.Duration) {}}
					rounds, quiet, err := r.RunUntilQuiet(ctx, 5)
					must(t, err)
					if !quiet || rounds != wantRounds {
						t.Fatalf("recovery: %d rounds, quiet %v", rounds, quiet)
					}
				case "resubmit":
					res, err := s.Ingest(ctx, req1("op-1"))
					must(t, err)
					if res.Outcome != wantOutcome {
						t.Fatalf("resubmit: %+v", res)
					}
				}
				checkConverged(t, w, "op-1", want)
			})
		}
	}
}

// A crash during recovery itself, twice, still converges.
func TestRecrashDuringRecovery(t *testing.T) {
	want := baseline(t, req1("op-1"))
	for _, p := range []faults.Point{faults.BetweenGraphBatches, faults.BeforeStateCommit, faults.BeforeCompleted} {
		t.Run(string(p), func(t *testing.T) {
			w := newWorld()
			w.sched.Arm(p, faults.Action{Kind: faults.Crash, Hit: 1})
			if runUntilCrash(func() { _, _ = w.service().Ingest(ctx, req1("op-1")) }) == nil {
				t.Fatal("no crash")
			}
			for i := 0; i < 2; i++ {
				s := w.restart()
				w.sched.Arm(p, faults.Action{Kind: faults.Crash}) // every hit
				if runUntilCrash(func() { _, _ = s.Resume(ctx, "op-1") }) == nil {
					t.Fatalf("recovery %d did not crash at %s", i+1, p)
				}
			}
			_, err := w.restart().Resume(ctx, "op-1")
			must(t, err)
			checkConverged(t, w, "op-1", want)
		})
	}
}

// A crash before PREPARED leaves no durable intent: Resume finds nothing,
// the caller resubmits and a new plan is made.
func TestCrashBeforePrepared(t *testing.T) {
	for _, p := range []faults.Point{faults.BeforeExtract, faults.BeforePrepare} {
		t.Run(string(p), func(t *testing.T) {
			w := newWorld()
			w.sched.Arm(p, faults.Action{Kind: faults.Crash, Hit: 1})
			if runUntilCrash(func() { _, _ = w.service().Ingest(ctx, req1("op-1")) }) == nil {
				t.Fatal("no crash")
			}
			s := w.restart()
			if _, err := s.Resume(ctx, "op-1"); !errors.Is(err, reference.ErrNoPersistedPlan) {
				t.Fatalf("resume: %v", err)
			}
			res, err := s.Ingest(ctx, req1("op-1"))
			must(t, err)
			if res.Outcome != reference.OutcomeCompleted || w.writer.Calls() != 4 {
				t.Fatalf("%+v", res)
			}
		})
	}
}

// Java: completedOperationResumeShouldBeNoOp.
func TestCompletedOperationResumeShouldBeNoOp(t *testing.T) {
	w := newWorld()
	_, err := w.service().Ingest(ctx, req1("op-1"))
	must(t, err)
	calls := w.writer.Calls()
	before := w.op(t, "op-1")
	for i := 0; i < 2; i++ {
		res, err := w.service().Resume(ctx, "op-1")
		must(t, err)
		if res.Outcome != reference.OutcomeAlreadyDone || res.Revision != 1 || res.Writes != 0 {
			t.Fatalf("resume of a completed operation: %+v", res)
		}
	}
	if w.writer.Calls() != calls {
		t.Fatalf("writer called again: %d -> %d", calls, w.writer.Calls())
	}
	if len(w.versions(t, docID)) != 1 || w.log.Calls("op-1") != 1 {
		t.Fatal("versions or model calls changed")
	}
	if after := w.op(t, "op-1"); after != before {
		t.Fatalf("operation record changed: %+v -> %+v", before, after)
	}
}

// Java: resumeShouldRejectOperationWithoutPersistedPlan.
func TestResumeShouldRejectOperationWithoutPersistedPlan(t *testing.T) {
	w := newWorld()
	s := w.service()
	if _, err := s.Resume(ctx, "no-such-operation"); !errors.Is(err, reference.ErrNoPersistedPlan) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("unknown id: %v", err)
	}
	// A legacy operation stored without a plan.
	w.sched.Arm(faults.BeforeGraphWrite, faults.Action{Kind: faults.Crash, Hit: 1})
	runUntilCrash(func() { _, _ = s.Ingest(ctx, req1("op-1")) })
	w.ops.noPlan["op-1"] = true
	s2 := w.restart()
	if _, err := s2.Resume(ctx, "op-1"); !errors.Is(err, reference.ErrNoPersistedPlan) || !strings.Contains(err.Error(), "plan was not found") {
		t.Fatalf("operation without plan: %v", err)
	}
	if w.writer.Calls() != 0 || w.log.Calls("op-1") != 1 {
		t.Fatal("resume without a plan wrote or called the model")
	}
}

// Java: concurrentSameDocumentIngestionShouldWriteExactlyOnce and
// sharedLockShouldSerializeSameDocumentAcrossServiceInstances.
func TestConcurrentSameDocumentAcrossServiceInstances(t *testing.T) {
	w := newWorld()
	w.writer.delay = 20 * time.Millisecond
	a, b := w.service(), w.service()
	for _, s := range []*reference.Service{a, b} {
		s.Extractor = slowExtractor{Extractor: s.Extractor, delay: 20 * time.Millisecond}
		s.BatchSize = 100
	}
	results := concurrently(t, a, b, req1("same-document"))
	checkWrittenOnce(t, w, results)
}

// Two instances built without a Holder share one store and one lock
// provider: each must still lease under its own name, so the per-document
// lock keeps them apart and the model is called once (before the fix both
// leased as "service#1" and both ran the model).
func TestConcurrentSameDocumentInstancesWithoutHolder(t *testing.T) {
	w := newWorld()
	w.writer.delay = 20 * time.Millisecond
	a, b := w.service(), w.service()
	for _, s := range []*reference.Service{a, b} {
		s.Holder = ""
		s.Extractor = slowExtractor{Extractor: s.Extractor, delay: 20 * time.Millisecond}
		s.BatchSize = 100
	}
	var mu sync.Mutex
	holders := map[string]bool{}
	obs := reference.ObserverFunc(func(e reference.Event) {
		if e.Kind == reference.EvLeaseAcquire {
			mu.Lock()
			holders[e.Holder] = true
			mu.Unlock()
		}
	})
	a.Observer, b.Observer = obs, obs
	results := concurrently(t, a, b, req1("same-document"))
	checkWrittenOnce(t, w, results)
	if len(holders) != 2 {
		t.Errorf("lease holders %v: want two distinct names for two instances", holders)
	}
}

func TestConcurrentSameDocumentSameService(t *testing.T) {
	w := newWorld()
	w.writer.delay = 20 * time.Millisecond
	s := w.service()
	s.Extractor = slowExtractor{Extractor: s.Extractor, delay: 20 * time.Millisecond}
	s.BatchSize = 100
	results := concurrently(t, s, s, req1("same-document"))
	checkWrittenOnce(t, w, results)
}

func concurrently(t *testing.T, a, b *reference.Service, req reference.IngestRequest) []reference.Result {
	t.Helper()
	start := make(chan struct{})
	var wg sync.WaitGroup
	results := make([]reference.Result, 2)
	errs := make([]error, 2)
	for i, s := range []*reference.Service{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = s.Ingest(ctx, req)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("ingest %d: %v", i, err)
		}
	}
	return results
}

func checkWrittenOnce(t *testing.T, w *world, results []reference.Result) {
	t.Helper()
	if n := w.log.Calls("same-document"); n != 1 {
		t.Errorf("model called %d times for one operationId, want 1", n)
	}
	if n := w.writer.Calls(); n != 1 {
		t.Errorf("writer called %d times, want 1", n)
	}
	st, ok := w.current(t, docID)
	if !ok || st.Revision != 1 {
		t.Errorf("revision %d, want 1", st.Revision)
	}
	ops, err := w.stores.Ops.List(ctx)
	must(t, err)
	if len(ops) != 1 || ops[0].Stage != reference.Completed {
		t.Errorf("operations %+v, want one COMPLETED", ops)
	}
	outcomes := []string{string(results[0].Outcome), string(results[1].Outcome)}
	sort.Strings(outcomes)
	if outcomes[0] != string(reference.OutcomeAlreadyDone) || outcomes[1] != string(reference.OutcomeCompleted) {
		t.Errorf("outcomes %v, want one COMPLETED and one ALREADY_COMPLETED", outcomes)
	}
}

func TestSameOperationIDWithOtherContentIsAPlanConflict(t *testing.T) {
	w := newWorld()
	s := w.service()
	_, err := s.Ingest(ctx, req1("op-1"))
	must(t, err)
	calls := w.writer.Calls()
	other := req1("op-1")
	other.Content = "Person:Mallory"
	if _, err := s.Ingest(ctx, other); !errors.Is(err, reference.ErrPlanConflict) {
		t.Fatalf("other content: %v", err)
	}
	otherDoc := req1("op-1")
	otherDoc.DocumentID = "doc-2"
	if _, err := s.Ingest(ctx, otherDoc); !errors.Is(err, reference.ErrPlanConflict) {
		t.Fatalf("other document: %v", err)
	}
	if w.writer.Calls() != calls || w.log.Calls("op-1") != 1 {
		t.Fatal("a conflicting submission wrote or called the model")
	}
	// Also while the first is still unfinished (crashed after PREPARED).
	w2 := newWorld()
	w2.sched.Arm(faults.BeforeGraphApplied, faults.Action{Kind: faults.Crash, Hit: 1})
	runUntilCrash(func() { _, _ = w2.service().Ingest(ctx, req1("op-1")) })
	if _, err := w2.restart().Ingest(ctx, other); !errors.Is(err, reference.ErrPlanConflict) {
		t.Fatalf("other content while unfinished: %v", err)
	}
	if op := w2.op(t, "op-1"); op.Stage != reference.Prepared || op.PlanFingerprint == "" {
		t.Fatalf("the first plan must stay bound: %+v", op)
	}
}

const (
	contentX = "Person:Alice -KNOWS-> Person:Bob\nPerson:Alice -LIKES-> Person:Carol"
	contentY = "Person:Alice -KNOWS-> Person:Bob\nPerson:Dave"
)

// crashedAfterGraphWrite is a world where op-A (contentX, planned at
// revision 0) wrote its graph and died before GRAPH_APPLIED, and the request
// of op-B (contentY) that is to win the revision race.
func crashedAfterGraphWrite(t *testing.T) (*world, reference.IngestRequest) {
	t.Helper()
	w := newWorld()
	reqA := reference.IngestRequest{Space: space, DocumentID: docID, OperationID: "op-A", Content: contentX}
	w.sched.Arm(faults.BeforeGraphApplied, faults.Action{Kind: faults.Crash, Hit: 1})
	if runUntilCrash(func() { _, _ = w.service().Ingest(ctx, reqA) }) == nil {
		t.Fatal("no crash")
	}
	return w, reference.IngestRequest{Space: space, DocumentID: docID, OperationID: "op-B", Content: contentY}
}

// Revision conflict: A planned at revision 0 writes its graph and dies;
// B commits revision 1; resuming A must not force A over B: A is
// abandoned, a new operation is planned against revision 1 and commits
// revision 2; A's edges that no ACTIVE document supports are reconciled.
func TestRevisionConflictSupersedes(t *testing.T) {
	w, reqB := crashedAfterGraphWrite(t)
	alice, bob, carol := reference.NodeID("Person", "Alice"), reference.NodeID("Person", "Bob"), reference.NodeID("Person", "Carol")
	knows := reference.EdgeKey{Source: alice, Type: "KNOWS", Target: bob}
	likes := reference.EdgeKey{Source: alice, Type: "LIKES", Target: carol}
	if g := w.graph(t); len(g.Edges) != 2 {
		t.Fatalf("A's graph write missing: %v", g.SortedEdges())
	}
	s := w.restart()
	rb, err := s.Ingest(ctx, reqB)
	must(t, err)
	if rb.Revision != 1 {
		t.Fatalf("B: %+v", rb)
	}
	w.writer.mu.Lock()
	mark := len(w.writer.applied)
	w.writer.mu.Unlock()
	res, err := s.Resume(ctx, "op-A")
	must(t, err)
	if res.Outcome != reference.OutcomeSuperseded || res.SupersededBy == "" || res.Revision != 2 {
		t.Fatalf("resume A: %+v", res)
	}
	a := w.op(t, "op-A")
	if a.Disposition != reference.Abandoned || a.SupersededBy != res.SupersededBy || !strings.Contains(a.FailureReason, "revision") {
		t.Fatalf("A: %+v", a)
	}
	n := w.op(t, res.SupersededBy)
	if n.Stage != reference.Completed || n.ExpectedRevision != 1 {
		t.Fatalf("superseding operation: %+v", n)
	}
	vs := w.versions(t, docID)
	if len(vs) != 2 || vs[0].OperationID != "op-B" || vs[1].OperationID != res.SupersededBy || vs[1].Revision != 2 {
		t.Fatalf("versions %+v", vs)
	}
	// A never writes again after losing the race, and nothing B supports is
	// deleted; A's edges survive only where an ACTIVE state supports them.
	w.writer.mu.Lock()
	after := append([]reference.Mutation(nil), w.writer.applied[mark:]...)
	w.writer.mu.Unlock()
	for _, m := range after {
		if m.OperationID == "op-A" && len(m.UpsertNodes)+len(m.UpsertEdges)+len(m.DeleteNodes) > 0 {
			t.Fatalf("A wrote again after losing the race: %+v", m)
		}
		for _, k := range m.DeleteEdges {
			if k == knows {
				t.Fatalf("%s deleted an edge B supports", m.OperationID)
			}
		}
	}
	if st, _ := w.current(t, docID); !st.Supports(likes) || !st.Supports(knows) {
		t.Fatalf("revision 2 must carry A's content: %+v", st)
	}
	checkGraphIsFoldOfActiveStates(t, w)
	if w.log.Calls("op-A") != 1 || w.log.Calls("op-B") != 1 || w.log.Calls(res.SupersededBy) != 1 {
		t.Fatal("model call counts")
	}
	// Resuming A again is a no-op with its disposition.
	again, err := w.service().Resume(ctx, "op-A")
	must(t, err)
	if again.Outcome != reference.OutcomeAbandoned || again.SupersededBy != res.SupersededBy {
		t.Fatalf("resume abandoned: %+v", again)
	}
}

// A's re-plan after a lost revision race is the operation a fresh ingestion
// of A's content on the latest revision derives. If a caller's resubmission
// ran that operation first and it was dead-lettered, A's intent never took
// effect: A is answered ABANDONED naming it, never SUPERSEDED (found by
// explore --from the walkthrough's incident, seed 2, schedule 1021).
func TestRevisionConflictOntoDeadLetteredReplan(t *testing.T) {
	w, reqB := crashedAfterGraphWrite(t)
	s := w.restart()
	_, err := s.Ingest(ctx, reqB)
	must(t, err)
	replan := reference.IngestOperationID(space, docID, reference.ContentHash(contentX), 1)
	w.sched.Arm(faults.BeforeStateCommit, faults.Action{Kind: faults.Permanent, Hit: 1})
	if _, err := s.Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: docID, OperationID: replan, Content: contentX}); err == nil {
		t.Fatal("the resubmission was not dead-lettered")
	}
	w.sched.Disarm()
	if c := w.op(t, replan); c.Disposition != reference.DeadLetter {
		t.Fatalf("resubmission: %+v", c)
	}
	res, err := w.restart().Resume(ctx, "op-A")
	must(t, err)
	if res.Outcome != reference.OutcomeAbandoned || res.SupersededBy != replan {
		t.Fatalf("resume A after its re-plan was dead-lettered: %+v", res)
	}
	if a := w.op(t, "op-A"); a.Disposition != reference.Abandoned || a.SupersededBy != replan {
		t.Fatalf("A: %+v", a)
	}
	if st, _ := w.current(t, docID); st.OperationID != "op-B" || st.Revision != 1 {
		t.Fatalf("the document must stay at B's revision: %+v", st)
	}
	checkGraphIsFoldOfActiveStates(t, w)
}

// The edges in the graph are exactly those ACTIVE states support.
func checkGraphIsFoldOfActiveStates(t *testing.T, w *world) {
	t.Helper()
	sts, err := w.stores.States.List(ctx, space)
	must(t, err)
	want := map[reference.EdgeKey]bool{}
	for _, st := range sts {
		if st.Status == reference.DocActive {
			for _, k := range st.FactSources {
				want[k] = true
			}
		}
	}
	g := w.graph(t)
	got := map[reference.EdgeKey]bool{}
	for k := range g.Edges {
		got[k] = true
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("graph edges %v, ACTIVE states support %v", g.SortedEdges(), want)
	}
}

// When the winner already holds the same content, the re-plan is a NO_OP:
// A is ABANDONED without a superseding operation, and nothing B supports is
// deleted.
func TestRevisionConflictAbandonsWhenReplanIsNoOp(t *testing.T) {
	w := newWorld()
	reqA := reference.IngestRequest{Space: space, DocumentID: docID, OperationID: "op-A", Content: contentX}
	reqB := reqA
	reqB.OperationID = "op-B"
	w.sched.Arm(faults.BeforeGraphApplied, faults.Action{Kind: faults.Crash, Hit: 1})
	runUntilCrash(func() { _, _ = w.service().Ingest(ctx, reqA) })
	s := w.restart()
	_, err := s.Ingest(ctx, reqB)
	must(t, err)
	res, err := s.Resume(ctx, "op-A")
	must(t, err)
	if res.Outcome != reference.OutcomeAbandoned || res.SupersededBy != "" || res.Revision != 1 {
		t.Fatalf("resume A: %+v", res)
	}
	if a := w.op(t, "op-A"); a.Disposition != reference.Abandoned {
		t.Fatalf("A: %+v", a)
	}
	st, _ := w.current(t, docID)
	if st.Revision != 1 || st.OperationID != "op-B" {
		t.Fatalf("state %+v", st)
	}
	checkGraphIsFoldOfActiveStates(t, w)
	if len(w.graph(t).Edges) != 2 {
		t.Fatal("edges B supports were deleted")
	}
}

func TestRetract(t *testing.T) {
	w := newWorld()
	s := w.service()
	_, err := s.Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: "doc-1", Content: contentX})
	must(t, err)
	_, err = s.Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: "doc-2", Content: "Person:Alice -KNOWS-> Person:Bob"})
	must(t, err)
	alice, bob, carol := reference.NodeID("Person", "Alice"), reference.NodeID("Person", "Bob"), reference.NodeID("Person", "Carol")
	knows := reference.EdgeKey{Source: alice, Type: "KNOWS", Target: bob}
	likes := reference.EdgeKey{Source: alice, Type: "LIKES", Target: carol}
	res, err := s.Retract(ctx, space, "doc-1")
	must(t, err)
	if res.Outcome != reference.OutcomeCompleted || res.Revision != 2 || res.OperationID != reference.RetractOperationID(space, "doc-1", 1) {
		t.Fatalf("retract: %+v", res)
	}
	st, _ := w.current(t, "doc-1")
	if st.Status != reference.DocRetracted || st.Revision != 2 || len(st.FactSources) != 0 {
		t.Fatalf("retracted state %+v", st)
	}
	g := w.graph(t)
	if _, ok := g.Edges[knows]; !ok {
		t.Fatal("edge supported by another ACTIVE document was deleted")
	}
	if _, ok := g.Edges[likes]; ok {
		t.Fatal("edge only the retracted document supported is still there")
	}
	checkGraphIsFoldOfActiveStates(t, w)
	if vs := w.versions(t, "doc-1"); len(vs) != 2 || vs[1].Status != reference.DocRetracted {
		t.Fatalf("versions %+v", vs)
	}
	// Retracting again, or an absent document, is a no-op.
	for _, d := range []string{"doc-1", "doc-absent"} {
		r, err := s.Retract(ctx, space, d)
		must(t, err)
		if r.Outcome != reference.OutcomeNoOp {
			t.Fatalf("retract %s again: %+v", d, r)
		}
	}
	// Retract the last supporter: the edge goes.
	_, err = s.Retract(ctx, space, "doc-2")
	must(t, err)
	if len(w.graph(t).Edges) != 0 {
		t.Fatalf("edges left: %v", w.graph(t).SortedEdges())
	}
}

func TestRetractCrashResumes(t *testing.T) {
	w := newWorld()
	_, err := w.service().Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: docID, Content: contentX})
	must(t, err)
	w.sched.Arm(faults.BeforeStateCommit, faults.Action{Kind: faults.Crash, Hit: 1})
	if runUntilCrash(func() { _, _ = w.service().Retract(ctx, space, docID) }) == nil {
		t.Fatal("no crash")
	}
	res, err := w.restart().Retract(ctx, space, docID)
	must(t, err)
	if res.Outcome != reference.OutcomeCompleted || res.Revision != 2 {
		t.Fatalf("%+v", res)
	}
	if len(w.graph(t).Edges) != 0 || len(w.versions(t, docID)) != 2 {
		t.Fatal("retraction did not converge")
	}
}

func TestNoOpReingestDoesNotCallTheModel(t *testing.T) {
	w := newWorld()
	s := w.service()
	_, err := s.Ingest(ctx, req1("op-1"))
	must(t, err)
	calls := w.writer.Calls()
	res, err := s.Ingest(ctx, req1("op-2"))
	must(t, err)
	if res.Outcome != reference.OutcomeNoOp || res.Revision != 1 || res.OperationID != "op-2" {
		t.Fatalf("re-ingest: %+v", res)
	}
	if w.log.Calls("op-2") != 0 || w.writer.Calls() != calls {
		t.Fatal("NO_OP called the model or wrote")
	}
	if _, err := w.stores.Ops.Get(ctx, "op-2"); !errors.Is(err, reference.ErrNotFound) {
		t.Fatalf("a NO_OP must not persist an operation: %v", err)
	}
	plan, err := s.Plan(ctx, req1("op-3"))
	must(t, err)
	if plan.Kind != reference.NoOp || plan.ExpectedRevision() != 1 {
		t.Fatalf("plan %+v", plan)
	}
	// Other content is not a NO_OP.
	res, err = s.Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: docID, OperationID: "op-4", Content: contentX})
	must(t, err)
	if res.Outcome != reference.OutcomeCompleted || res.Revision != 2 || w.log.Calls("op-4") != 1 {
		t.Fatalf("changed content: %+v", res)
	}
	// The stale edges of revision 1 are gone.
	checkGraphIsFoldOfActiveStates(t, w)
}

func TestRegisteredAliasReusesNode(t *testing.T) {
	w := newWorld()
	s := w.service()
	_, err := s.Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: "d1", Content: "Person:Alice aka Ally"})
	must(t, err)
	_, err = s.Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: "d2", Content: "person:ALLY -KNOWS-> Person:Bob"})
	must(t, err)
	g := w.graph(t)
	alice := reference.NodeID("Person", "Alice")
	if _, ok := g.Nodes[reference.NodeID("person", "ALLY")]; ok || len(g.Nodes) != 2 {
		t.Fatalf("alias created a second node: %v", g.SortedNodes())
	}
	if _, ok := g.Edges[reference.EdgeKey{Source: alice, Type: "KNOWS", Target: reference.NodeID("Person", "Bob")}]; !ok {
		t.Fatalf("edge not on the registered node: %v", g.SortedEdges())
	}
}

func TestBlankArgumentsAreInvalid(t *testing.T) {
	w := newWorld()
	s := w.service()
	for _, k := range [][2]string{{"", docID}, {"  ", docID}, {space, ""}, {space, "\t"}} {
		if _, err := s.Ingest(ctx, reference.IngestRequest{Space: k[0], DocumentID: k[1], Content: doc1}); !errors.Is(err, reference.ErrInvalidArgument) {
			t.Errorf("Ingest(%q,%q): %v", k[0], k[1], err)
		}
		if _, err := s.Retract(ctx, k[0], k[1]); !errors.Is(err, reference.ErrInvalidArgument) {
			t.Errorf("Retract(%q,%q): %v", k[0], k[1], err)
		}
		if _, err := s.Plan(ctx, reference.IngestRequest{Space: k[0], DocumentID: k[1], Content: doc1}); !errors.Is(err, reference.ErrInvalidArgument) {
			t.Errorf("Plan(%q,%q): %v", k[0], k[1], err)
		}
	}
	ops, err := w.stores.Ops.List(ctx)
	must(t, err)
	if len(ops) != 0 || w.writer.Calls() != 0 {
		t.Fatal("invalid requests left traces")
	}
}

// A holder whose lease was taken over while it stalled is refused before its
// state commit (fencing); the new holder's world finishes the operation.
func TestLeaseLostBeforeStateCommit(t *testing.T) {
	want := baseline(t, req1("op-1"))
	w := newWorld()
	s := w.service()
	events := &eventLog{}
	s.Observer = events
	sched := faults.NewSchedule()
	sched.Arm(faults.BeforeLeaseCheck, faults.Action{Kind: faults.Pause, Hit: 1, PauseFor: time.Minute})
	var intruder reference.Lease
	s.Faults = &faults.Runtime{Injector: sched, Sleep: func(ctx context.Context, d time.Duration) {
		// The stall outlives the lease; another instance takes it over.
		w.clock.Jump(d)
		l, ok, err := w.stores.Locks.TryAcquire(ctx, space, docID, "intruder", w.clock.Now(), 60_000)
		if err != nil || !ok {
			t.Errorf("intruder could not take the expired lease: %v %v", ok, err)
		}
		intruder = l
	}}
	_, err := s.Ingest(ctx, req1("op-1"))
	if !errors.Is(err, reference.ErrLeaseLost) {
		t.Fatalf("stale holder: %v, want ErrLeaseLost", err)
	}
	if _, ok := w.current(t, docID); ok {
		t.Fatal("a stale holder committed the state")
	}
	if op := w.op(t, "op-1"); op.Stage != reference.GraphApplied || op.Disposition != reference.Active {
		t.Fatalf("operation %+v", op)
	}
	if len(events.kinds(reference.EvLeaseLost)) != 1 {
		t.Fatal("lease-lost not observed")
	}
	// While the intruder holds the lease, another instance waits and times out.
	s2 := w.service()
	s2.AcquireTimeout = 200 * time.Millisecond
	s2.Sleep = func(_ context.Context, d time.Duration) error { w.clock.Jump(d); return nil }
	if _, err := s2.Resume(ctx, "op-1"); !errors.Is(err, reference.ErrLockTimeout) {
		t.Fatalf("resume under a live foreign lease: %v", err)
	}
	must(t, w.stores.Locks.Release(ctx, intruder))
	_, err = w.service().Resume(ctx, "op-1")
	must(t, err)
	checkConverged(t, w, "op-1", want)
}

// Fencing of the graph write: a holder that stalls between batches past its
// lease does not write the next batch.
func TestLeaseLostBetweenGraphBatches(t *testing.T) {
	want := baseline(t, req1("op-1"))
	w := newWorld()
	s := w.service()
	sched := faults.NewSchedule()
	sched.Arm(faults.BetweenGraphBatches, faults.Action{Kind: faults.Pause, Hit: 1, PauseFor: time.Minute})
	s.Faults = &faults.Runtime{Injector: sched, Sleep: func(ctx context.Context, d time.Duration) {
		w.clock.Jump(d)
		if _, ok, err := w.stores.Locks.TryAcquire(ctx, space, docID, "intruder", w.clock.Now(), 1000); err != nil || !ok {
			t.Errorf("intruder: %v %v", ok, err)
		}
	}}
	_, err := s.Ingest(ctx, req1("op-1"))
	if !errors.Is(err, reference.ErrLeaseLost) {
		t.Fatalf("stale writer: %v", err)
	}
	if w.writer.Calls() != 1 {
		t.Fatalf("writer calls %d, want 1 (no batch after the lease was lost)", w.writer.Calls())
	}
	_, err = w.restart().Resume(ctx, "op-1")
	must(t, err)
	checkConverged(t, w, "op-1", want)
}

func TestPermanentFaultDeadLettersAndReconciles(t *testing.T) {
	for _, p := range []faults.Point{faults.BeforeGraphWrite, faults.BeforeRegistrySave, faults.BeforeStateCommit} {
		t.Run(string(p), func(t *testing.T) {
			w := newWorld()
			s := w.service()
			w.sched.Arm(p, faults.Action{Kind: faults.Permanent, Hit: 1})
			_, err := s.Ingest(ctx, req1("op-1"))
			var ie *faults.InjectedError
			if !errors.As(err, &ie) || ie.Retryable || reference.IsRetryable(err) {
				t.Fatalf("ingest: %v", err)
			}
			op := w.op(t, "op-1")
			if op.Disposition != reference.DeadLetter || op.Attempts != 1 || !strings.Contains(op.FailureReason, "permanent") || !op.Finished() {
				t.Fatalf("operation %+v", op)
			}
			if _, ok := w.current(t, docID); ok {
				t.Fatal("state committed")
			}
			// The plan never committed: its edges are reconciled away.
			if g := w.graph(t); len(g.Edges) != 0 {
				t.Fatalf("dead-lettered plan left edges: %v", g.SortedEdges())
			}
			// Recovery does not retry a dead letter; Resume reports it.
			w.sched.Disarm()
			calls := w.writer.Calls()
			var sleeps []time.Duration
			r := &reference.Recovery{Service: w.service(), Sleep: func(_ context.Context, d time.Duration) { sleeps = append(sleeps, d) }}
			rep, err := r.RunOnce(ctx)
			must(t, err)
			if rep.Scanned != 0 || rep.Claimed != 0 || len(sleeps) != 0 {
				t.Fatalf("recovery touched a dead letter: %+v", rep)
			}
			res, err := w.service().Resume(ctx, "op-1")
			must(t, err)
			if res.Outcome != reference.OutcomeDeadLetter || w.writer.Calls() != calls {
				t.Fatalf("resume dead letter: %+v", res)
			}
		})
	}
}

// The service's deliberate defects (mutants) are caught by the checks above:
// the tests can fail.
func TestServiceMutantsAreCaught(t *testing.T) {
	want := baseline(t, req1("op-1"))
	crashThenResume := func(bug reference.Bug, p faults.Point) string {
		w := newWorld()
		s := w.service()
		s.Bugs = []reference.Bug{bug}
		w.sched.Arm(p, faults.Action{Kind: faults.Crash, Hit: 1})
		if runUntilCrash(func() { _, _ = s.Ingest(ctx, req1("op-1")) }) == nil {
			t.Fatalf("%s: no crash at %s", bug, p)
		}
		s2 := w.restart()
		s2.Bugs = []reference.Bug{bug}
		if _, err := s2.Resume(ctx, "op-1"); err != nil {
			return err.Error()
		}
		return convergenceProblem(t, w, "op-1", want)
	}
	if p := crashThenResume(reference.BugRecallModelOnResume, faults.BeforeGraphApplied); !strings.Contains(p, "model called 2 times") {
		t.Errorf("recall-model-on-resume not caught: %q", p)
	}
	if p := crashThenResume(reference.BugAdvanceBeforeGraphWrite, faults.BeforeGraphWrite); !strings.Contains(p, "graph differs") {
		t.Errorf("advance-before-graph-write not caught: %q", p)
	}
	// skip-revision-check forces the stale plan over the newer revision.
	w := newWorld()
	reqA := reference.IngestRequest{Space: space, DocumentID: docID, OperationID: "op-A", Content: contentX}
	w.sched.Arm(faults.BeforeGraphApplied, faults.Action{Kind: faults.Crash, Hit: 1})
	runUntilCrash(func() { _, _ = w.service().Ingest(ctx, reqA) })
	s := w.restart()
	s.Bugs = []reference.Bug{reference.BugSkipRevisionCheck}
	_, err := s.Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: docID, OperationID: "op-B", Content: contentY})
	must(t, err)
	res, err := s.Resume(ctx, "op-A")
	if err == nil && res.Outcome == reference.OutcomeCompleted {
		if a := w.op(t, "op-A"); a.Disposition != reference.Abandoned {
			return // caught: the stale plan A committed instead of being abandoned
		}
	}
	t.Errorf("skip-revision-check not caught: %+v %v", res, err)
}

// A dead letter is reconciled before it is recorded, and a permanent
// failure, once recorded, is never retried: a process that dies right after
// recording that the operation failed for good (before the record of the
// dead letter) leaves an active operation with a pending dead letter whose
// graph effects may be half removed. Whoever resumes it (recovery, or a
// caller resubmitting the same intent) finishes the dead letter: the
// effects reconciled away, the disposition recorded, the plan not run
// again. (The explorer found the old order, dead letter recorded before the
// reconciliation, which left edges forever; and the old resume, which ran
// the plan again and so retried a permanent error.)
func TestDeadLetterReconciledBeforeItIsRecorded(t *testing.T) {
	for _, by := range []string{"recovery", "resubmit"} {
		t.Run(by, func(t *testing.T) {
			w := newWorld()
			w.sched.Arm(faults.BeforeStateCommit, faults.Action{Kind: faults.Permanent, Hit: 1})
			w.sched.Arm(faults.BeforeMarkFailed, faults.Action{Kind: faults.Unknown, Hit: 1})
			if hit := runUntilCrash(func() { _, _ = w.service().Ingest(ctx, req1("op-1")) }); hit == nil || hit.Point != faults.BeforeMarkFailed {
				t.Fatalf("no crash after the failure was recorded (hit %v)", hit)
			}
			o := w.op(t, "op-1")
			if o.Disposition != reference.Active || !strings.HasPrefix(o.FailureReason, reference.DeadLetterPending) {
				t.Fatalf("after the crash the operation is %s/%q, want active with a pending dead letter", o.Disposition, o.FailureReason)
			}
			s := w.restart()
			before := w.sched.Hits(faults.BeforeStateCommit) + w.sched.Hits(faults.BeforeGraphApplied)
			// Had the plan run again, this would be a second permanent
			// failure of one operation.
			w.sched.Arm(faults.BeforeGraphApplied, faults.Action{Kind: faults.Permanent})
			w.sched.Arm(faults.BeforeStateCommit, faults.Action{Kind: faults.Permanent})
			if by == "recovery" {
				r := &reference.Recovery{Service: s, Sleep: func(context.Context, time.Duration) {}}
				_, quiet, err := r.RunUntilQuiet(ctx, 5)
				must(t, err)
				if !quiet {
					t.Fatal("recovery did not quiesce")
				}
			} else {
				res, err := s.Ingest(ctx, req1("op-1"))
				if err != nil || res.Outcome != reference.OutcomeDeadLetter {
					t.Fatalf("the resubmitted intent was answered %+v, %v; want DEAD_LETTER", res, err)
				}
			}
			if n := w.sched.Hits(faults.BeforeStateCommit) + w.sched.Hits(faults.BeforeGraphApplied) - before; n != 0 {
				t.Fatalf("the plan of a pending dead letter ran again (%d step(s) hit)", n)
			}
			o = w.op(t, "op-1")
			if o.Disposition != reference.DeadLetter || strings.HasPrefix(o.FailureReason, reference.DeadLetterPending) {
				t.Fatalf("operation ended %s/%q, want a recorded dead letter", o.Disposition, o.FailureReason)
			}
			if !strings.Contains(o.FailureReason, "injected permanent fault at beforeStateCommit") {
				t.Fatalf("the dead letter lost its cause: %q", o.FailureReason)
			}
			if g := w.graph(t); len(g.Edges) != 0 {
				t.Fatalf("the dead letter left edges no ACTIVE document supports: %v", g.Edges)
			}
		})
	}
}
