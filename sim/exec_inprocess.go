package sim

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
	ps   *PlanSaveStores
	dir  string
	uses int
}

// rotateSharedAfter is how many cases an embedded backend's shared handle
// serves before it is closed and its database removed: every case writes
// into a space of its own, and a database that only grows makes every
// statement of later cases walk deeper B-trees.
const rotateSharedAfter = 64

// borrow takes a free shared handle, opening a new one when none is free.
func (r *Runner) borrow(ctx context.Context, env CaseEnv) (*sharedStores, error) {
	r.poolMu.Lock()
	if n := len(r.pool); n > 0 {
		s := r.pool[n-1]
		r.pool = r.pool[:n-1]
		r.poolMu.Unlock()
		return s, nil
	}
	r.opened++
	slot := r.opened
	r.poolMu.Unlock()
	e := env
	e.Dir = fmt.Sprintf("%s/shared-%d", r.cfg.WorkDir, slot)
	// The handle outlives the case that opened it: its logs too.
	e.Logs = e.Dir + "-logs"
	s := &sharedStores{dir: e.Dir}
	var err error
	open := r.backend.Open
	if r.backend.OpenShared != nil && !r.cfg.InProcessFiles {
		open = r.backend.OpenShared
	}
	if s.st, err = open(ctx, e); err != nil {
		return nil, err
	}
	if r.backend.OpenPlanSave != nil {
		ps, err := r.backend.OpenPlanSave(ctx, e)
		if err != nil {
			s.st.Close()
			return nil, err
		}
		s.ps = &ps
	}
	r.poolMu.Lock()
	r.all = append(r.all, s)
	r.poolMu.Unlock()
	return s, nil
}

func (r *Runner) giveBack(s *sharedStores) {
	s.uses++
	// A simulated store serves one case: a fresh one costs less than
	// one that keeps every earlier case.
	if r.backend.Simulated || (r.backend.Embedded && s.uses >= rotateSharedAfter) {
		r.poolMu.Lock()
		r.all = slices.DeleteFunc(r.all, func(x *sharedStores) bool { return x == s })
		r.poolMu.Unlock()
		s.close()
		if r.backend.Embedded {
			_ = os.RemoveAll(s.dir)
		}
		return
	}
	r.poolMu.Lock()
	r.pool = append(r.pool, s)
	r.poolMu.Unlock()
}

func (s *sharedStores) close() {
	_ = s.st.Close()
	if s.ps != nil && s.ps.Closer != nil {
		_ = s.ps.Closer.Close()
	}
}

// CloseShared closes the in-process mode's shared handles, and what the
// backend holds across cases (Backend.Close: store-cmd's pooled store
// processes). The runner stays usable.
func (r *Runner) CloseShared() {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	for _, s := range r.all {
		s.close()
	}
	r.all, r.pool = nil, nil
	if r.backend.Close != nil {
		_ = r.backend.Close()
	}
	if r.recover != nil && r.recover.backend.Close != nil {
		_ = r.recover.backend.Close() // version B's pooled snapshot processes (sim/upgrade.go)
	}
}

type inprocCase struct {
	r      *Runner
	env    CaseEnv
	hist   *history.Mem
	clock  *simClock
	calls  *reference.MemoryCallLog
	shared *sharedStores
	pid    int
	// stops are the case's stopped (ended or paused) simulated worker
	// processes, for their lease holders (sim/worker/deadholder.go).
	stops worker.StopMap
}

func (r *Runner) newInProcessCase(ctx context.Context, c catalogue.Case, env CaseEnv) (*inprocCase, error) {
	x := &inprocCase{r: r, env: env, hist: &history.Mem{}, clock: &simClock{now: 1_800_000_000_000}, calls: &reference.MemoryCallLog{}, pid: 100}
	if !r.backend.Volatile {
		s, err := r.borrow(ctx, env)
		if err != nil {
			return nil, fmt.Errorf("open backend %s: %w", r.backend.Name, err)
		}
		x.shared = s
	}
	return x, nil
}

func (x *inprocCase) history() (history.Log, error) { return x.hist.Snapshot(), nil }

func (x *inprocCase) close() {
	if x.shared != nil {
		x.r.giveBack(x.shared)
	}
}

func (x *inprocCase) snapshot(ctx context.Context, c catalogue.Case, env CaseEnv, space string, h history.Log) (check.Snapshot, check.Observed, error) {
	obs := Observe(h, c, space)
	if x.shared != nil {
		var ps PlanSaveStores
		if x.shared.ps != nil {
			ps = *x.shared.ps
		}
		if x.r.backend.Local {
			if err := ctx.Err(); err != nil {
				return check.Snapshot{}, obs, err
			}
			ctx = context.WithoutCancel(ctx) // as the workers' store calls (callGate.detached)
		}
		snap, err := check.Take(ctx, x.shared.st, space, ps.Checkpoints, ps.Plans, obs.Threads)
		return snap, obs, err
	}
	return x.r.snapshot(ctx, c, env, space, h)
}

type inprocWorker struct {
	spec   WorkerSpec
	hist   *history.Mem
	parked chan struct{}
	done   chan verdict.WorkerResult
	relCh  chan struct{}
	res    *verdict.WorkerResult
}

func (x *inprocCase) start(ctx context.Context, spec WorkerSpec, _ time.Duration) (runningWorker, error) {
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
	opt := WorkerOptions{
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
	opt.DetachStores = x.r.backend.Local
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
		err = RunWorker(ctx, spec, x.r.backend, opt)
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

func (w *inprocWorker) waitHitOrExit(ctx context.Context, _ time.Duration) {
	select {
	case <-w.parked:
	case r := <-w.done:
		w.res = &r
	case <-ctx.Done():
	}
}

func (w *inprocWorker) release() {
	select {
	case <-w.relCh:
	default:
		close(w.relCh)
	}
}

func (w *inprocWorker) kill() {}

func (w *inprocWorker) wait() verdict.WorkerResult {
	if w.res == nil {
		r := <-w.done
		w.res = &r
	}
	return *w.res
}
