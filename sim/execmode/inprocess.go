package execmode

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// simClock is the in-process mode's time: sleeping advances it, so lease
// expiry and backoff cost nothing and the same case runs the same way
// every time.
type simClock struct {
	mu  sync.Mutex
	now int64
}

func (c *simClock) Now() int64 { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *simClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.now += max(d.Milliseconds(), 1)
	c.mu.Unlock()
	return nil
}

func (c *simClock) advanceTo(t int64) {
	c.mu.Lock()
	if t > c.now {
		c.now = t
	}
	c.mu.Unlock()
}

// sharedStores are the in-process mode's handles on a durable backend. A
// case borrows one for its whole run; cases running at once use different
// ones (separate databases for embedded backends), so they do not queue on
// one writer lock.
type sharedStores struct {
	st   reference.Stores
	ps   *worker.PlanSaveStores
	dir  string
	uses int
}

// rotateSharedAfter is how many cases an embedded backend's shared handle
// serves before it is closed and its database removed: every case writes
// into a space of its own, and a database that only grows makes every
// statement of later cases walk deeper B-trees.
const rotateSharedAfter = 64

// borrow takes a free shared handle, opening a new one when none is free.
func (m *Modes) borrow(ctx context.Context, env worker.CaseEnv) (*sharedStores, error) {
	m.poolMu.Lock()
	if n := len(m.pool); n > 0 {
		s := m.pool[n-1]
		m.pool = m.pool[:n-1]
		m.poolMu.Unlock()
		return s, nil
	}
	m.opened++
	slot := m.opened
	m.poolMu.Unlock()
	e := env
	e.Dir = fmt.Sprintf("%s/shared-%d", m.run.WorkDir, slot)
	// The handle outlives the case that opened it: its logs too.
	e.Logs = e.Dir + "-logs"
	s := &sharedStores{dir: e.Dir}
	var err error
	open := m.run.Backend.Open
	if m.run.Backend.OpenShared != nil && !m.run.InProcessFiles {
		open = m.run.Backend.OpenShared
	}
	if s.st, err = open(ctx, e); err != nil {
		return nil, err
	}
	if m.run.Backend.OpenPlanSave != nil {
		ps, err := m.run.Backend.OpenPlanSave(ctx, e)
		if err != nil {
			s.st.Close()
			return nil, err
		}
		s.ps = &ps
	}
	m.poolMu.Lock()
	m.all = append(m.all, s)
	m.poolMu.Unlock()
	return s, nil
}

func (m *Modes) giveBack(s *sharedStores) {
	s.uses++
	// A simulated store serves one case: a fresh one costs less than
	// one that keeps every earlier case.
	if m.run.Backend.Simulated || (m.run.Backend.Embedded && s.uses >= rotateSharedAfter) {
		m.poolMu.Lock()
		m.all = slices.DeleteFunc(m.all, func(x *sharedStores) bool { return x == s })
		m.poolMu.Unlock()
		s.close()
		if m.run.Backend.Embedded {
			_ = os.RemoveAll(s.dir)
		}
		return
	}
	m.poolMu.Lock()
	m.pool = append(m.pool, s)
	m.poolMu.Unlock()
}

func (s *sharedStores) close() {
	_ = s.st.Close()
	if s.ps != nil && s.ps.Closer != nil {
		_ = s.ps.Closer.Close()
	}
}

// CloseShared closes the in-process mode's shared handles, and what the
// backend holds across cases (Backend.Close: store-cmd's pooled store
// processes). The modes stay usable.
func (m *Modes) CloseShared() {
	m.poolMu.Lock()
	defer m.poolMu.Unlock()
	for _, s := range m.all {
		s.close()
	}
	m.all, m.pool = nil, nil
	if m.run.Backend.Close != nil {
		_ = m.run.Backend.Close()
	}
}

type inprocCase struct {
	m      *Modes
	env    worker.CaseEnv
	hist   *history.Mem
	clock  *simClock
	calls  *reference.MemoryCallLog
	shared *sharedStores
	pid    int
	// stops are the case's stopped (ended or paused) simulated worker
	// processes, for their lease holders (sim/worker/deadholder.go).
	stops worker.StopMap
}

// NewInProcessCase prepares a case whose workers run as goroutines of
// this process, on a shared handle of the backend (unless it is
// Volatile).
func (m *Modes) NewInProcessCase(ctx context.Context, env worker.CaseEnv) (Case, error) {
	x := &inprocCase{m: m, env: env, hist: &history.Mem{}, clock: &simClock{now: 1_800_000_000_000}, calls: &reference.MemoryCallLog{}, pid: 100}
	if !m.run.Backend.Volatile {
		s, err := m.borrow(ctx, env)
		if err != nil {
			return nil, fmt.Errorf("open backend %s: %w", m.run.Backend.Name, err)
		}
		x.shared = s
	}
	return x, nil
}

// InProcessCase is a Case of the in-process mode, whose workers share
// the case's stores, clock and model-call log: what the runner puts in
// before the first worker (a scenario's initial state) goes there.
type InProcessCase interface {
	Case
	// Shared returns the stores the case's workers share (nil for a
	// Volatile backend, whose workers each start from empty stores), the
	// case's clock now, and its model-call log.
	Shared() (st *reference.Stores, now int64, calls *reference.MemoryCallLog)
}

// Shared implements InProcessCase.
func (x *inprocCase) Shared() (*reference.Stores, int64, *reference.MemoryCallLog) {
	if x.shared == nil {
		return nil, x.clock.Now(), x.calls
	}
	return &x.shared.st, x.clock.Now(), x.calls
}

func (x *inprocCase) History() (history.Log, error) { return x.hist.Snapshot(), nil }

func (x *inprocCase) Close() {
	if x.shared != nil {
		x.m.giveBack(x.shared)
	}
}

func (x *inprocCase) Snapshot(ctx context.Context, c catalogue.Case, env worker.CaseEnv, space string, h history.Log) (check.Snapshot, check.Observed, error) {
	obs := x.m.run.Observe(h, c, space)
	if x.shared != nil {
		var ps worker.PlanSaveStores
		if x.shared.ps != nil {
			ps = *x.shared.ps
		}
		if x.m.run.Backend.Local {
			if err := ctx.Err(); err != nil {
				return check.Snapshot{}, obs, err
			}
			ctx = context.WithoutCancel(ctx) // as the workers' store calls (callGate.detached)
		}
		snap, err := check.Take(ctx, x.shared.st, space, ps.Checkpoints, ps.Plans, obs.Threads)
		return snap, obs, err
	}
	return x.m.run.Snapshot(ctx, c, env, space, h)
}

type inprocWorker struct {
	spec   worker.WorkerSpec
	hist   *history.Mem
	parked chan struct{}
	done   chan verdict.WorkerResult
	relCh  chan struct{}
	res    *verdict.WorkerResult
}

func (x *inprocCase) Start(ctx context.Context, spec worker.WorkerSpec, _ time.Duration) (Worker, error) {
	if spec.KillAfterMicros > 0 {
		return nil, fmt.Errorf("worker %s: a random-instant kill needs real worker processes, not the in-process mode (a goroutine cannot be stopped at an instant)", spec.Worker)
	}
	if _, ok := spec.Arms[faults.StoreCommit]; ok {
		return nil, fmt.Errorf("worker %s: %s needs real worker processes, not the in-process mode (its workers share one process and one database: a commit is nobody's in particular)", spec.Worker, faults.StoreCommit)
	}
	x.pid++
	w := &inprocWorker{spec: spec, hist: x.hist, parked: make(chan struct{}, 1), done: make(chan verdict.WorkerResult, 1), relCh: make(chan struct{})}
	hw := x.hist.Writer(spec.Worker, spec.Phase, x.clock.Now)
	sched := faults.NewSchedule()
	for p, a := range spec.Arms {
		sched.Arm(p, a)
	}
	crashed := false
	opt := worker.WorkerOptions{
		Injector: sched,
		History:  hw,
		CallLog:  &worker.MemCallLog{Log: x.calls, Hist: hw},
		Now:      x.clock.Now,
		Sleep:    x.clock.Sleep,
		PID:      x.pid,
		Crash: func(faults.Hit) {
			// The simulated process dies here: nothing it would still do
			// reaches the stores or the history.
			crashed = true
			hw.Kill()
			runtime.Goexit()
		},
		Pause: func(ctx context.Context, d time.Duration) {
			start := x.clock.Now()
			if !spec.Background {
				x.clock.advanceTo(start + d.Milliseconds())
				return
			}
			w.parked <- struct{}{}
			select {
			case <-w.relCh:
			case <-ctx.Done():
			}
			x.clock.advanceTo(start + d.Milliseconds())
		},
	}
	opt.Stops = &x.stops
	opt.DetachStores = x.m.run.Backend.Local
	if x.shared != nil {
		opt.Stores = &x.shared.st
		opt.PlanSave = x.shared.ps
	}
	t0 := time.Now()
	goWorker(func() {
		var err error
		defer func() {
			x.stops.Record(worker.StopLine{Worker: spec.Worker, Phase: spec.Phase, PID: opt.PID, What: worker.StopEnded, At: x.clock.Now()})
			wr := verdict.WorkerResult{Worker: spec.Worker, PID: opt.PID, Took: time.Since(t0), Exit: "ok"}
			if crashed {
				wr.Exit = "killed (simulated)"
			} else if err != nil {
				wr.Exit = "error: " + err.Error()
			}
			w.done <- wr
		}()
		err = worker.RunWorker(ctx, spec, x.m.run.Backend, opt)
	})
	return w, nil
}

// Simulated worker processes run on goroutines that outlive them: a
// goroutine starts with a small stack, and a worker's calls through the
// service, the harness's wrappers and a SQL driver grow it four or five
// times over, each a copy (a twentieth of an exploration on the
// simulated store). A goroutine whose worker ended waits a moment for
// the next one, with the stack it grew; a worker that crashes ends its
// goroutine (runtime.Goexit) as before.
var idleWorkers = make(chan func())

// idleWorkerFor is how long a goroutine waits for the next worker.
const idleWorkerFor = time.Second

// goWorker runs f on an idle worker goroutine, or a new one.
func goWorker(f func()) {
	select {
	case idleWorkers <- f:
	default:
		go workerLoop(f)
	}
}

func workerLoop(f func()) {
	for {
		f()
		t := time.NewTimer(idleWorkerFor)
		select {
		case f = <-idleWorkers:
			t.Stop()
		case <-t.C:
			return
		}
	}
}

func (w *inprocWorker) WaitHitOrExit(ctx context.Context, _ time.Duration) {
	select {
	case <-w.parked:
	case r := <-w.done:
		w.res = &r
	case <-ctx.Done():
	}
}

func (w *inprocWorker) Release() {
	select {
	case <-w.relCh:
	default:
		close(w.relCh)
	}
}

func (w *inprocWorker) Kill() {}

func (w *inprocWorker) Wait() verdict.WorkerResult {
	if w.res == nil {
		r := <-w.done
		w.res = &r
	}
	return *w.res
}
