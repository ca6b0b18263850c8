package storetest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

// DurableSteps proves that no store method of an adapter takes more than
// one durable step, which is why the project's adapters declare no store
// windows (faults.At): a crash can only fall before or after a call, never
// inside one. commits returns how many transactions the adapter's
// databases have committed so far (counted from outside the adapter: WAL
// commit frames, transaction ids); only this test may write to them.
//
// It runs the standard script (four ingestions and a retraction), a crash
// after a graph write and the recovery that finishes it, and System B's
// approval and save, and requires every store call to add at most one
// commit, every write method to be seen committing (else the count is
// blind), reads to commit nothing, and two commits in one call to count
// two.
func DurableSteps(t *testing.T, st reference.Stores, cps plansave.CheckpointStore, plans plansave.PlanStore, commits func() int) {
	t.Helper()
	ctx := context.Background()
	s := &steps{commits: commits, max: map[string]int{}}
	counted := reference.Stores{Ops: countedOps{st.Ops, s}, States: countedStates{st.States, s}, Registry: countedRegistry{st.Registry, s},
		Writer: countedWriter{st.Writer, s}, Locks: countedLocks{st.Locks, s}}
	sched := faults.NewSchedule()
	svc := &reference.Service{Stores: counted, Extractor: &reference.FakeExtractor{Log: &reference.MemoryCallLog{}}, Holder: "proof",
		LeaseTTL: 300 * time.Millisecond, AcquireTimeout: 5 * time.Second, BatchSize: 2,
		Faults: &faults.Runtime{Injector: sched, Crash: func(faults.Hit) { panic(crashed{}) }}}
	run := func(do, doc, content string) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(crashed); !ok {
					panic(r)
				}
				err = fmt.Errorf("crashed")
			}
		}()
		if do == "retract" {
			_, err = svc.Retract(ctx, "sp", doc)
			return err
		}
		_, err = svc.Ingest(ctx, reference.IngestRequest{Space: "sp", DocumentID: doc, Content: content})
		return err
	}
	total0 := commits()
	for _, a := range [][3]string{
		{"ingest", "d4", "Person:Frank {team=graph} -MANAGES-> Person:Grace\nPerson:Grace -WORKS_AT-> Org:Globex\n"},
		{"ingest", "d1", "Person:Alice {role=author}\nPerson:Alice -KNOWS-> Person:Bob\nPerson:Bob -WORKS_AT-> Org:Acme\n"},
		{"ingest", "d2", "Person:Bob -WORKS_AT-> Org:Acme\nPerson:Carol -KNOWS-> Person:Bob\n"},
		{"ingest", "d1", "Person:Alice {role=editor}\nPerson:Alice -KNOWS-> Person:Carol\n"},
		{"retract", "d2", ""},
	} {
		if err := run(a[0], a[1], a[2]); err != nil {
			t.Fatalf("%s %s: %v", a[0], a[1], err)
		}
	}
	// A crash after the graph write, then recovery: a claim, the resumed
	// stage changes, the state commit and its version, the claim's release.
	sched.Arm(faults.BeforeGraphApplied, faults.On(faults.Crash, 1))
	if err := run("ingest", "d3", "Person:Dan -KNOWS-> Person:Eve\n"); err == nil {
		t.Fatal("the armed crash did not fire")
	}
	sched.Disarm()
	rec := &reference.Recovery{Service: svc, Space: "sp", ClaimTTL: time.Minute}
	if r, err := rec.RunOnce(ctx); err != nil || r.Completed != 1 {
		t.Fatalf("recovery: %+v, err %v; want the crashed ingestion completed", r, err)
	}
	wf := &plansave.Workflow{Checkpoints: countedCheckpoints{cps, s}, Plans: countedPlans{plans, s}, NewOperationID: func(th string) string { return "op-" + th }}
	if _, err := wf.Start(ctx, "t1", "alice", "Which route?", 30); err != nil {
		t.Fatal(err)
	}
	approve := true
	if cp, err := wf.Invoke(ctx, "t1", &approve); err != nil || cp.Status != "saved" {
		t.Fatalf("plan save: %+v, %v", cp, err)
	}
	total1 := commits()
	methods := make([]string, 0, len(s.max))
	for m := range s.max {
		methods = append(methods, m)
	}
	sort.Strings(methods)
	var report []string
	for _, m := range methods {
		report = append(report, fmt.Sprintf("%s %d", m, s.max[m]))
		if s.max[m] > 1 {
			t.Errorf("%s committed %d transactions in one call: a crash between them is a window inside the store, to declare with faults.At", m, s.max[m])
		}
	}
	t.Logf("most commits in one call: %s", strings.Join(report, ", "))
	if total1-total0 != s.sum {
		t.Errorf("the run committed %d transactions, the write methods %d: a read method committed", total1-total0, s.sum)
	}
	for _, m := range []string{"Ops.CreateIfAbsent", "Ops.CompareAndSet", "Ops.Claim", "States.CompareAndSet", "States.RecordVersion", "Registry.SaveAll", "Writer.Apply", "Locks.TryAcquire", "Locks.Release", "PlanSave.Save", "PlanSave.Put"} {
		if s.max[m] != 1 {
			t.Errorf("%s: at most %d commits in a call, want 1 (the count would not see a durable step; the proof would be vacuous)", m, s.max[m])
		}
	}
	s.measure("two leases", func() {
		for _, doc := range []string{"x1", "x2"} {
			if _, ok, err := st.Locks.TryAcquire(ctx, "sp", doc, "proof", time.Now().UnixMilli(), 1000); err != nil || !ok {
				t.Fatalf("acquire %s: %v %v", doc, ok, err)
			}
		}
	})
	if s.max["two leases"] != 2 {
		t.Errorf("two commits in one call counted as %d", s.max["two leases"])
	}
}

type crashed struct{}

// steps measures the durable commits each store call adds.
type steps struct {
	commits func() int
	mu      sync.Mutex
	max     map[string]int
	sum     int
}

func (s *steps) measure(method string, call func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.commits()
	call()
	d := s.commits() - before
	s.sum += d
	if d > s.max[method] {
		s.max[method] = d
	}
	if _, ok := s.max[method]; !ok {
		s.max[method] = d
	}
}

type countedOps struct {
	reference.OperationStore
	s *steps
}

func (o countedOps) CreateIfAbsent(ctx context.Context, op reference.Operation, plan reference.Plan) (ok bool, err error) {
	o.s.measure("Ops.CreateIfAbsent", func() { ok, err = o.OperationStore.CreateIfAbsent(ctx, op, plan) })
	return
}

func (o countedOps) CompareAndSet(ctx context.Context, expected, next reference.Operation) (ok bool, err error) {
	o.s.measure("Ops.CompareAndSet", func() { ok, err = o.OperationStore.CompareAndSet(ctx, expected, next) })
	return
}

func (o countedOps) Claim(ctx context.Context, id, holder string, now, ttl int64) (ok bool, err error) {
	o.s.measure("Ops.Claim", func() { ok, err = o.OperationStore.Claim(ctx, id, holder, now, ttl) })
	return
}

func (o countedOps) ReleaseClaim(ctx context.Context, id, holder string) (ok bool, err error) {
	o.s.measure("Ops.ReleaseClaim", func() { ok, err = o.OperationStore.ReleaseClaim(ctx, id, holder) })
	return
}

type countedStates struct {
	reference.DocumentStateStore
	s *steps
}

func (c countedStates) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (ok bool, err error) {
	c.s.measure("States.CompareAndSet", func() { ok, err = c.DocumentStateStore.CompareAndSet(ctx, expected, next) })
	return
}

func (c countedStates) Remove(ctx context.Context, space, doc string, rev int64) (ok bool, err error) {
	c.s.measure("States.Remove", func() { ok, err = c.DocumentStateStore.Remove(ctx, space, doc, rev) })
	return
}

func (c countedStates) RecordVersion(ctx context.Context, st reference.DocumentState) (err error) {
	c.s.measure("States.RecordVersion", func() { err = c.DocumentStateStore.RecordVersion(ctx, st) })
	return
}

type countedRegistry struct {
	reference.EntityRegistry
	s *steps
}

func (c countedRegistry) SaveAll(ctx context.Context, space string, regs []reference.EntityRegistration) (err error) {
	c.s.measure("Registry.SaveAll", func() { err = c.EntityRegistry.SaveAll(ctx, space, regs) })
	return
}

type countedWriter struct {
	reference.GraphWriter
	s *steps
}

func (c countedWriter) Apply(ctx context.Context, space string, m reference.Mutation) (err error) {
	c.s.measure("Writer.Apply", func() { err = c.GraphWriter.Apply(ctx, space, m) })
	return
}

type countedLocks struct {
	reference.LockProvider
	s *steps
}

func (c countedLocks) TryAcquire(ctx context.Context, space, doc, holder string, now, ttl int64) (l reference.Lease, ok bool, err error) {
	c.s.measure("Locks.TryAcquire", func() { l, ok, err = c.LockProvider.TryAcquire(ctx, space, doc, holder, now, ttl) })
	return
}

func (c countedLocks) Renew(ctx context.Context, l reference.Lease, now, ttl int64) (out reference.Lease, err error) {
	c.s.measure("Locks.Renew", func() { out, err = c.LockProvider.Renew(ctx, l, now, ttl) })
	return
}

func (c countedLocks) Release(ctx context.Context, l reference.Lease) (err error) {
	c.s.measure("Locks.Release", func() { err = c.LockProvider.Release(ctx, l) })
	return
}

type countedCheckpoints struct {
	plansave.CheckpointStore
	s *steps
}

func (c countedCheckpoints) Put(ctx context.Context, cp plansave.Checkpoint) (err error) {
	c.s.measure("PlanSave.Put", func() { err = c.CheckpointStore.Put(ctx, cp) })
	return
}

type countedPlans struct {
	plansave.PlanStore
	s *steps
}

func (c countedPlans) Save(ctx context.Context, owner, op, q string, minutes int) (id int64, err error) {
	c.s.measure("PlanSave.Save", func() { id, err = c.PlanStore.Save(ctx, owner, op, q, minutes) })
	return
}
