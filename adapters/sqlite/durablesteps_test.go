package sqlite_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
	"github.com/crashmatrix/crashmatrix/sim"
)

// Why the SQLite adapter declares no store windows (faults.At): none of
// its methods does more than one durable step. Proof, from outside the
// adapter: every transaction SQLite commits in WAL mode ends with one
// commit frame in the write-ahead log, so the commit frames a store call
// adds are the durable steps it took. The test runs the standard script,
// a crash and recovery, and System B's save, and requires every store call
// to add at most one.

// walCommits counts the commit frames of the current generation of a
// write-ahead log (frames whose salt matches the header's; a commit frame
// records the database size after the commit, 0 otherwise).
func walCommits(t *testing.T, path string) (commits int, salt uint64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 32 {
		return 0, 0
	}
	pageSize := int(binary.BigEndian.Uint32(b[8:12]))
	if pageSize == 1 {
		pageSize = 65536
	}
	s1, s2 := binary.BigEndian.Uint32(b[16:20]), binary.BigEndian.Uint32(b[20:24])
	for off := 32; off+24+pageSize <= len(b); off += 24 + pageSize {
		f := b[off : off+24]
		if binary.BigEndian.Uint32(f[8:12]) != s1 || binary.BigEndian.Uint32(f[12:16]) != s2 {
			break // a frame of an earlier generation: the log ends here
		}
		if binary.BigEndian.Uint32(f[4:8]) != 0 {
			commits++
		}
	}
	return commits, uint64(s1)<<32 | uint64(s2)
}

// steps measures the commit frames each store call adds to the WAL files.
type steps struct {
	t    *testing.T
	wals []string
	mu   sync.Mutex
	max  map[string]int
	sum  int
}

func (s *steps) commits() (int, []uint64) {
	n := 0
	var salts []uint64
	for _, w := range s.wals {
		c, salt := walCommits(s.t, w)
		n += c
		salts = append(salts, salt)
	}
	return n, salts
}

func (s *steps) measure(method string, call func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before, sb := s.commits()
	call()
	after, sa := s.commits()
	if fmt.Sprint(sb) != fmt.Sprint(sa) && before != 0 {
		s.t.Fatalf("%s: the write-ahead log was checkpointed and restarted during the call; commits cannot be counted", method)
	}
	d := after - before
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

type countedPlanSave struct {
	*sqlite.PlanSave
	s *steps
}

func (c countedPlanSave) Put(ctx context.Context, cp plansave.Checkpoint) (err error) {
	c.s.measure("PlanSave.Put", func() { err = c.PlanSave.Put(ctx, cp) })
	return
}

func (c countedPlanSave) Save(ctx context.Context, owner, op, q string, minutes int) (id int64, err error) {
	c.s.measure("PlanSave.Save", func() { id, err = c.PlanSave.Save(ctx, owner, op, q, minutes) })
	return
}

type crashed struct{}

func TestNoStoreMethodTakesTwoDurableSteps(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "crashmatrix.db")
	st, err := sqlite.Open(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ps, err := sqlite.OpenPlanSave(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	s := &steps{t: t, max: map[string]int{}}
	counted := reference.Stores{Ops: countedOps{st.Ops, s}, States: countedStates{st.States, s}, Registry: countedRegistry{st.Registry, s},
		Writer: countedWriter{st.Writer, s}, Locks: countedLocks{st.Locks, s}}
	sched := faults.NewSchedule()
	svc := &reference.Service{Stores: counted, Extractor: &reference.FakeExtractor{Log: &reference.MemoryCallLog{}}, Holder: "proof", LeaseTTL: 300 * time.Millisecond, AcquireTimeout: 5 * time.Second, BatchSize: 2,
		Faults: &faults.Runtime{Injector: sched, Crash: func(faults.Hit) { panic(crashed{}) }}}
	run := func(a sim.Action) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(crashed); !ok {
					panic(r)
				}
				err = fmt.Errorf("crashed")
			}
		}()
		switch a.Do {
		case "ingest":
			_, err = svc.Ingest(ctx, reference.IngestRequest{Space: "sp", DocumentID: a.Doc, Content: a.Content})
		case "retract":
			_, err = svc.Retract(ctx, "sp", a.Doc)
		}
		return err
	}
	// The commit frames are counted once every log exists.
	for _, a := range sim.StandardScript()[:1] {
		if err := run(a); err != nil {
			t.Fatal(err)
		}
	}
	wf := &plansave.Workflow{Checkpoints: countedPlanSave{ps, s}, Plans: countedPlanSave{ps, s}, NewOperationID: func(th string) string { return "op-" + th }}
	if _, err := wf.Start(ctx, "t1", "alice", "Which route?", 30); err != nil {
		t.Fatal(err)
	}
	s.wals, _ = filepath.Glob(filepath.Join(dir, "*-wal"))
	if len(s.wals) != 3 {
		t.Fatalf("write-ahead logs %v, want the ingestion database's and System B's two (checkpoints, plans)", s.wals)
	}
	s.max, s.sum = map[string]int{}, 0
	total0, _ := s.commits()
	for _, a := range sim.StandardScript()[1:] {
		if err := run(a); err != nil {
			t.Fatal(err)
		}
	}
	// A crash after the graph write, then recovery: claims, resumed stage
	// changes, the state commit and its version.
	sched.Arm(faults.BeforeGraphApplied, faults.On(faults.Crash, 1))
	if err := run(sim.Action{Do: "ingest", Doc: "d3", Content: sim.DocD3a}); err == nil {
		t.Fatal("the armed crash did not fire")
	}
	sched.Disarm()
	rec := &reference.Recovery{Service: svc, Space: "sp", ClaimTTL: time.Minute}
	if r, err := rec.RunOnce(ctx); err != nil || r.Completed != 1 {
		t.Fatalf("recovery: %+v, err %v; want the crashed ingestion completed", r, err)
	}
	approve := true
	if cp, err := wf.Invoke(ctx, "t1", &approve); err != nil || cp.Status != "saved" {
		t.Fatalf("plan save: %+v, %v", cp, err)
	}
	total1, _ := s.commits()
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
	// The counter sees a method with two durable steps: two lease
	// acquisitions in one call count 2.
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
	for _, m := range []string{"Ops.CreateIfAbsent", "Ops.CompareAndSet", "Ops.Claim", "States.CompareAndSet", "States.RecordVersion", "Registry.SaveAll", "Writer.Apply", "Locks.TryAcquire", "Locks.Release", "PlanSave.Save", "PlanSave.Put"} {
		if s.max[m] != 1 {
			t.Errorf("%s: at most %d commits in a call, want 1 (the count would not see a durable step; the proof would be vacuous)", m, s.max[m])
		}
	}
}
