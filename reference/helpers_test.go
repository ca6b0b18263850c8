package reference_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
)

const (
	space = "knowledge"
	docID = "doc-1"
)

// doc1 is the canonical test document: Character 林默, Organization 青云会
// and one MEMBER_OF relation, as in Agents-Flex's GraphIngestionRecoveryTest,
// plus a few more statements so that the mutation spans several batches.
const doc1 = `# recovery fixture
Character:林默 aka 小默 {level=3}
Organization:青云会
Character:林默 -MEMBER_OF-> Organization:青云会
Person:Alice -KNOWS-> Person:Bob
Person:Bob -KNOWS-> Person:Carol
`

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// clock is a test clock in unix milliseconds that advances by one on every
// read, like the AtomicLong clock of the Java test.
type clock struct{ t atomic.Int64 }

func newClock() *clock { c := &clock{}; c.t.Store(1_000_000); return c }

func (c *clock) Now() int64 { return c.t.Add(1) }

// Jump moves the clock forward (a process restart after a long pause: the
// dead process's lease has expired).
func (c *clock) Jump(d time.Duration) { c.t.Add(d.Milliseconds()) }

// crashRuntime simulates a process death at an armed point by a panic
// that runUntilCrash catches.
func crashRuntime(s *faults.Schedule) *faults.Runtime { return faults.PanicCrash(s) }

// runUntilCrash runs f and reports the crash that ended it, or nil.
var runUntilCrash = faults.RunUntilCrash

// countingWriter counts writer calls and can fail the next call or stall.
type countingWriter struct {
	reference.GraphWriter
	calls     atomic.Int64
	throwNext atomic.Bool
	delay     time.Duration
	mu        sync.Mutex
	applied   []reference.Mutation
	onApply   func(reference.Mutation)
}

func (w *countingWriter) Apply(ctx context.Context, space string, m reference.Mutation) error {
	w.calls.Add(1)
	if w.delay > 0 {
		time.Sleep(w.delay)
	}
	if w.throwNext.CompareAndSwap(true, false) {
		return errors.New("synthetic writer failure")
	}
	if w.onApply != nil {
		w.onApply(m)
	}
	w.mu.Lock()
	w.applied = append(w.applied, m)
	w.mu.Unlock()
	return w.GraphWriter.Apply(ctx, space, m)
}

func (w *countingWriter) Calls() int { return int(w.calls.Load()) }

// faultingOps wraps an operation store: casFalse makes the next CAS to the
// given stage report false once without changing anything.
type faultingOps struct {
	reference.OperationStore
	mu       sync.Mutex
	casFalse map[reference.Stage]bool
	noPlan   map[string]bool
}

func (o *faultingOps) CompareAndSet(ctx context.Context, expected, next reference.Operation) (bool, error) {
	o.mu.Lock()
	if o.casFalse[next.Stage] && next.Stage != expected.Stage {
		delete(o.casFalse, next.Stage)
		o.mu.Unlock()
		return false, nil
	}
	o.mu.Unlock()
	return o.OperationStore.CompareAndSet(ctx, expected, next)
}

func (o *faultingOps) GetPlan(ctx context.Context, id string) (reference.Plan, error) {
	o.mu.Lock()
	missing := o.noPlan[id]
	o.mu.Unlock()
	if missing {
		return reference.Plan{}, reference.ErrNotFound
	}
	return o.OperationStore.GetPlan(ctx, id)
}

// faultingStates wraps a state store: casFalse fails the next revision CAS
// (returns false, commits nothing); failRecord fails the next RecordVersion.
type faultingStates struct {
	reference.DocumentStateStore
	casFalse   atomic.Bool
	failRecord atomic.Bool
}

func (s *faultingStates) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	if s.casFalse.CompareAndSwap(true, false) {
		return false, nil
	}
	return s.DocumentStateStore.CompareAndSet(ctx, expected, next)
}

func (s *faultingStates) RecordVersion(ctx context.Context, st reference.DocumentState) error {
	if s.failRecord.CompareAndSwap(true, false) {
		return errors.New("synthetic history failure")
	}
	return s.DocumentStateStore.RecordVersion(ctx, st)
}

// faultingRegistry counts SaveAll calls and can fail the next one.
type faultingRegistry struct {
	reference.EntityRegistry
	saves    atomic.Int64
	failNext atomic.Bool
}

func (r *faultingRegistry) SaveAll(ctx context.Context, space string, regs []reference.EntityRegistration) error {
	r.saves.Add(1)
	if r.failNext.CompareAndSwap(true, false) {
		return errors.New("synthetic registry failure")
	}
	return r.EntityRegistry.SaveAll(ctx, space, regs)
}

// slowExtractor delays every model call (to widen race windows).
type slowExtractor struct {
	reference.Extractor
	delay time.Duration
}

func (e slowExtractor) Extract(ctx context.Context, req reference.ExtractRequest) (reference.Extraction, error) {
	time.Sleep(e.delay)
	return e.Extractor.Extract(ctx, req)
}

// world is one set of stores that outlives the simulated processes, with
// the harness-owned model call log.
type world struct {
	stores reference.Stores
	writer *countingWriter
	ops    *faultingOps
	states *faultingStates
	reg    *faultingRegistry
	log    *reference.MemoryCallLog
	clock  *clock
	sched  *faults.Schedule
	n      int
	// batch is the BatchSize of every service instance (default 2).
	batch int
}

func newWorld() *world {
	st := memory.New(memory.Options{})
	w := &world{log: &reference.MemoryCallLog{}, clock: newClock(), sched: faults.NewSchedule(), batch: 2}
	w.writer = &countingWriter{GraphWriter: st.Writer}
	w.ops = &faultingOps{OperationStore: st.Ops, casFalse: map[reference.Stage]bool{}, noPlan: map[string]bool{}}
	w.states = &faultingStates{DocumentStateStore: st.States}
	w.reg = &faultingRegistry{EntityRegistry: st.Registry}
	st.Writer, st.Ops, st.States, st.Registry = w.writer, w.ops, w.states, w.reg
	w.stores = st
	return w
}

// service starts a new simulated process over the world's stores.
func (w *world) service() *reference.Service {
	w.n++
	return &reference.Service{
		Stores:    w.stores,
		Extractor: &reference.FakeExtractor{Log: w.log},
		Faults:    crashRuntime(w.sched),
		Now:       w.clock.Now,
		Holder:    "svc-" + string(rune('0'+w.n)),
		BatchSize: w.batch,
	}
}

// restart simulates a process death: faults stop, the dead process's lease
// expires, and a new service instance starts.
func (w *world) restart() *reference.Service {
	w.sched.Disarm()
	w.clock.Jump(time.Hour)
	return w.service()
}

func (w *world) op(t *testing.T, id string) reference.Operation {
	t.Helper()
	op, err := w.stores.Ops.Get(context.Background(), id)
	must(t, err)
	return op
}

func (w *world) graph(t *testing.T) reference.Graph {
	t.Helper()
	g, err := w.stores.Writer.ReadGraph(context.Background(), space)
	must(t, err)
	return g
}

func (w *world) versions(t *testing.T, doc string) []reference.DocumentState {
	t.Helper()
	vs, err := w.stores.States.Versions(context.Background(), space, doc)
	must(t, err)
	return vs
}

func (w *world) current(t *testing.T, doc string) (reference.DocumentState, bool) {
	t.Helper()
	st, ok, err := w.stores.States.FindCurrent(context.Background(), space, doc)
	must(t, err)
	return st, ok
}

// baseline ingests req on fresh stores without faults and returns the graph.
func baseline(t *testing.T, req reference.IngestRequest) reference.Graph {
	t.Helper()
	w := newWorld()
	if _, err := w.service().Ingest(context.Background(), req); err != nil {
		t.Fatalf("baseline ingest: %v", err)
	}
	return w.graph(t)
}

func sameGraph(t *testing.T, got, want reference.Graph) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("graph differs from the fault-free run:\n got nodes %v edges %v\nwant nodes %v edges %v",
			got.SortedNodes(), got.SortedEdges(), want.SortedNodes(), want.SortedEdges())
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
