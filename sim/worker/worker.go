package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// WorkerOptions say how a worker injects and dies, and (in the in-process
// mode) what it shares with the other workers of its case.
type WorkerOptions struct {
	// Injector decides which faults fire (faults.Failpoints' registry,
	// armed by GO_FAILPOINTS, in a worker process).
	Injector faults.Injector
	// Crash ends the worker; in a process it is SIGKILL.
	Crash func(faults.Hit)

	// In-process overrides; zero in a worker process.
	History  *history.Writer
	Stores   *reference.Stores // shared; the worker does not close them
	PlanSave *PlanSaveStores   // shared; the worker does not close them
	CallLog  reference.CallLog
	Now      func() int64
	Sleep    func(context.Context, time.Duration) error
	Pause    func(context.Context, time.Duration)
	PID      int
	// Stops are the in-process case's stopped holders (a worker process
	// uses WorkerSpec.StoppedFile).
	Stops Stops
	// DetachStores runs store calls under a context that cannot end
	// (callGate.detached): in-process, on a store in this process.
	DetachStores bool
}

// KillSelf is the Crash of a worker process: SIGKILL, so no deferred
// function runs and nothing is flushed.
func KillSelf(faults.Hit) {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // never returns
}

// ProcessWorkerOptions are the options of a real worker process.
func ProcessWorkerOptions() WorkerOptions {
	return WorkerOptions{Injector: &faults.Failpoints{}, Crash: KillSelf}
}

// RunWorkerFile runs the worker whose spec the supervisor wrote at path, as
// a worker process does (SIGKILL on a crash), against backend; the
// binaries and re-executed test binaries that serve as workers call it.
func RunWorkerFile(ctx context.Context, path string, backend Backend) error {
	spec, err := ReadWorkerSpec(path)
	if err != nil {
		return err
	}
	return RunWorker(ctx, spec, backend, ProcessWorkerOptions())
}

// ReadWorkerSpec reads the spec the supervisor wrote for a worker.
func ReadWorkerSpec(path string) (WorkerSpec, error) {
	var spec WorkerSpec
	b, err := os.ReadFile(path)
	if err != nil {
		return spec, fmt.Errorf("worker spec: %w", err)
	}
	if decodeSpec(b, &spec) {
		return spec, nil
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return spec, fmt.Errorf("worker spec %s: %w", path, err)
	}
	return spec, nil
}

// RunWorker runs one worker's actions against the backend, recording
// everything in the case's history.
func RunWorker(ctx context.Context, spec WorkerSpec, b Backend, opt WorkerOptions) error {
	hist := opt.History
	pid := opt.PID
	if hist == nil {
		var err error
		if hist, err = history.Open(spec.History, spec.Worker, spec.Phase, func() int64 { return time.Now().UnixMilli() }); err != nil {
			return err
		}
		defer hist.Close()
		pid = os.Getpid()
	}
	hist.Append(history.Record{Kind: history.Start, PID: pid, Actions: len(spec.Actions)})
	began := time.Now()
	if spec.ClockFile != "" && opt.Now == nil {
		clock, err := OpenClock(spec.ClockFile)
		if err != nil {
			return err
		}
		defer clock.Close()
		opt.Now, opt.Sleep = clock.Now, clock.Sleep
		if opt.Pause == nil {
			opt.Pause = func(ctx context.Context, d time.Duration) { clock.pause(ctx, spec.ReleaseFile, d) }
		}
	}
	pause := opt.Pause
	if pause == nil {
		pause = func(ctx context.Context, d time.Duration) { waitRelease(ctx, spec.ReleaseFile, d) }
	}
	st := opt.Stops
	if st == nil && spec.StoppedFile != "" {
		st = StopFile(spec.StoppedFile)
	}
	now := opt.Now
	if now == nil {
		now = func() int64 { return time.Now().UnixMilli() }
	}
	pause = pausing(st, spec, pid, pause, now)
	if InWorkerProcess() {
		spawnNotes = spec.StartsFile
	}
	if spec.StartsFile != "" {
		// The supervisor leaves the time parked out of the deadline.
		parked := pause
		pause = func(ctx context.Context, d time.Duration) {
			goes := NotePause(spec.StartsFile)
			defer goes()
			parked(ctx, d)
		}
	}
	crash := opt.Crash
	if crash != nil {
		crash = func(h faults.Hit) {
			// The hit is recorded; nothing the worker's other goroutines
			// still do may start a record the kill could tear.
			hist.Kill()
			opt.Crash(h)
		}
	}
	rt := &faults.Runtime{
		Injector: opt.Injector,
		OnHit: func(h faults.Hit) {
			a := h.Action
			hist.Append(history.Record{Kind: history.Hit, Point: h.Point, Fault: &a, PID: pid})
		},
		Crash: crash,
		Sleep: pause,
		OnReach: func(r faults.Reach) {
			hist.Append(history.Record{Kind: history.Reach, Point: r.Point, Method: r.Method, PID: pid})
		},
	}
	if url := spec.Env.Servers[EndpointControl]; url != "" {
		rt.Server = serverFaultHook(url, spec.Worker, spec.Phase)
	}
	if spec.DiskFile != "" {
		hook, unmap, err := diskHook(spec.DiskFile)
		if err != nil {
			return err
		}
		defer unmap()
		rt.Disk = hook
	}
	// Store code reached from the service sees the runtime and can declare
	// its own windows (faults.At).
	ctx = faults.WithRuntime(ctx, rt)
	if opt.History == nil {
		// A worker process: its database's commits are its own.
		faults.CommitsTo(rt)
		defer faults.CommitsTo(nil)
	}
	defer armRandomKill(spec, hist, pid, began)()
	w := &worker{spec: spec, hist: hist, rt: rt, backend: b, opt: opt, pid: pid, stops: st}
	if spec.DurableFile != "" {
		mark, err := openCallMark(spec.DurableFile)
		if err != nil {
			return err
		}
		defer mark.close()
		w.mark = mark
	}
	if opt.Stores != nil {
		w.stores, w.sharedStores = opt.Stores, true
	}
	if opt.PlanSave != nil {
		w.ps, w.sharedPS = opt.PlanSave, true
	}
	defer w.close()
	for i, a := range spec.Actions {
		if err := ctx.Err(); err != nil {
			return err
		}
		hist.Append(history.Record{Kind: history.Action, Index: i, Do: a.Do, Op: a.Op, Doc: a.Doc, Thread: a.Thread})
		out, err := w.run(ctx, a)
		r := history.Record{Kind: history.Result, Index: i, Do: a.Do, Result: out, Calls: rt.Passed(faults.StoreCall), Commits: rt.Passed(faults.StoreCommit)}
		if err != nil {
			r.Err = err.Error()
		}
		hist.Append(r)
		if err != nil && !spec.ContinueOnError {
			hist.Append(history.Record{Kind: history.Exit, Reason: "stopped after a failed action", Micros: time.Since(began).Microseconds(),
				Calls: rt.Passed(faults.StoreCall), Commits: rt.Passed(faults.StoreCommit)})
			return nil
		}
	}
	hist.Append(history.Record{Kind: history.Exit, Reason: "done", Micros: time.Since(began).Microseconds(),
		Calls: rt.Passed(faults.StoreCall), Commits: rt.Passed(faults.StoreCommit)})
	return nil
}

// OpID scopes an operationId a scenario names to a case's space (an
// operationId is globally unique; many cases share one store).
func OpID(space, op string) string { return space + "/" + op }

// ThreadID scopes a System B thread id to a case's space, so that many
// cases can share one plan-save database.
func ThreadID(space, thread string) string { return space + "/" + thread }

type worker struct {
	spec                   WorkerSpec
	hist                   *history.Writer
	rt                     *faults.Runtime
	backend                Backend
	opt                    WorkerOptions
	pid                    int
	stores                 *reference.Stores
	ps                     *PlanSaveStores
	sharedStores, sharedPS bool
	svc                    *reference.Service
	// mark tells the supervisor which store call the worker is in
	// (WorkerSpec.DurableFile); nil otherwise.
	mark *callMark
	// thread is the System B thread of the action running.
	thread string
	// stops say which lease holders of the case have stopped.
	stops Stops
	// svcRun and reader are the service process and its reader, in a
	// service run (WorkerSpec.Service).
	svcRun *serviceRun
	reader *serviceReader
}

func (w *worker) close() {
	if w.svcRun != nil {
		_ = w.svcRun.svc.Close()
	}
	if w.stores != nil && !w.sharedStores {
		_ = w.stores.Close()
	}
	if w.ps != nil && w.ps.Closer != nil && !w.sharedPS {
		_ = w.ps.Closer.Close()
	}
}

func (w *worker) service(ctx context.Context) (*reference.Service, error) {
	if w.svc != nil {
		return w.svc, nil
	}
	if w.stores == nil {
		ready := NoteOpen(w.spec.StartsFile)
		st, err := w.backend.Open(ctx, w.spec.Env)
		ready()
		if err != nil {
			return nil, fmt.Errorf("open backend %s: %w", w.backend.Name, err)
		}
		w.stores = &st
		if w.spec.ClockFile == "" {
			warmUp(ctx, st, w.spec.Space)
		}
	}
	var calls reference.CallLog = &fileCallLog{dir: w.spec.CallDir, hist: w.hist}
	if w.opt.CallLog != nil {
		calls = w.opt.CallLog
	}
	w.svc = &reference.Service{
		Stores:         w.observed(*w.stores),
		Extractor:      &seenModel{Extractor: &reference.FakeExtractor{Log: calls}, w: w},
		Faults:         w.rt,
		Observer:       reference.ObserverFunc(func(e reference.Event) { w.hist.Append(history.Record{Kind: history.Event, Event: &e}) }),
		Now:            w.opt.Now,
		Sleep:          w.opt.Sleep,
		Holder:         fmt.Sprintf("%s/%d", w.spec.Worker, w.pid),
		LeaseTTL:       time.Duration(w.spec.LeaseTTLMillis) * time.Millisecond,
		AcquireTimeout: time.Duration(4*w.spec.LeaseTTLMillis+500) * time.Millisecond,
		BatchSize:      w.spec.BatchSize,
		Bugs:           w.spec.Bugs,
	}
	return w.svc, nil
}

func (w *worker) workflow(ctx context.Context) (*plansave.Workflow, error) {
	if w.backend.OpenPlanSave == nil {
		return nil, fmt.Errorf("backend %s does not provide System B stores", w.backend.Name)
	}
	if w.ps == nil {
		ready := NoteOpen(w.spec.StartsFile)
		ps, err := w.backend.OpenPlanSave(ctx, w.spec.Env)
		ready()
		if err != nil {
			return nil, fmt.Errorf("open plan-save stores: %w", err)
		}
		ps = markedPlanSave(ps, w.mark)
		w.ps = &ps
	}
	var bugs []plansave.Bug
	for _, b := range w.spec.Bugs {
		if b.System() == faults.PlanSave {
			bugs = append(bugs, plansave.Bug(b))
		}
	}
	return &plansave.Workflow{Checkpoints: w.ps.Checkpoints, Plans: &seenPlans{PlanStore: w.ps.Plans, w: w, thread: &w.thread}, Faults: w.rt,
		NewOperationID: func(thread string) string { return "op-" + thread }, Bugs: bugs}, nil
}

// run runs one action and says what it returned (nil when it never got
// as far as a result).
func (w *worker) run(ctx context.Context, a catalogue.Action) (*history.Outcome, error) {
	if w.spec.Service != nil {
		return w.runService(ctx, a)
	}
	switch a.Do {
	case "ingest", "retract", "resume", "recover":
		s, err := w.service(ctx)
		if err != nil {
			return nil, err
		}
		if a.Op != "" {
			a.Op = OpID(w.spec.Space, a.Op)
		}
		if a.Do == "ingest" || a.Do == "retract" {
			w.intent(ctx, a)
		}
		switch a.Do {
		case "ingest":
			r, err := s.Ingest(ctx, reference.IngestRequest{Space: w.spec.Space, DocumentID: a.Doc, OperationID: a.Op, Content: a.Content})
			return serviceOutcome(r), err
		case "retract":
			r, err := s.Retract(ctx, w.spec.Space, a.Doc)
			return serviceOutcome(r), err
		case "resume":
			r, err := s.Resume(ctx, a.Op)
			return serviceOutcome(r), err
		default:
			rounds := a.Rounds
			if rounds <= 0 {
				rounds = 10
			}
			rec := &reference.Recovery{Service: s, Space: w.spec.Space, ClaimTTL: time.Duration(w.spec.ClaimTTLMillis) * time.Millisecond,
				MaxAttempts: 4, BaseBackoff: 2 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
				Rand: rand.New(rand.NewPCG(uint64(w.spec.Seed), uint64(w.spec.Phase)))}
			if w.opt.Sleep != nil {
				rec.Sleep = func(ctx context.Context, d time.Duration) { _ = w.opt.Sleep(ctx, d) }
			}
			n, quiet, err := rec.RunUntilQuiet(ctx, rounds)
			if err == nil && !quiet {
				err = fmt.Errorf("recovery not quiet after %d rounds", n)
			}
			return &history.Outcome{Rounds: n, Quiet: quiet}, err
		}
	case "plansave-start", "plansave-invoke", "plansave-conflict":
		a.Thread = ThreadID(w.spec.Space, a.Thread)
		w.thread = a.Thread
		if a.Do == "plansave-start" {
			// The logical save: this owner's plan for this thread.
			w.seen(history.Observation{What: history.SeenIntent, Do: a.Do, Thread: a.Thread, Owner: a.Owner})
		}
		wf, err := w.workflow(ctx)
		if err != nil {
			return nil, err
		}
		switch a.Do {
		case "plansave-start":
			cp, err := wf.Start(ctx, a.Thread, a.Owner, a.Question, a.Minutes)
			return checkpointOutcome(cp), err
		case "plansave-invoke":
			approve := a.Approve
			cp, err := wf.Invoke(ctx, a.Thread, &approve)
			return checkpointOutcome(cp), err
		default:
			// A retry of the same operation_id with other content must fail
			// loudly. One field differs in each probe, so that a store that
			// compares only some of them is caught.
			cp, ok, err := w.ps.Checkpoints.Load(ctx, a.Thread)
			if err != nil || !ok {
				return nil, fmt.Errorf("plansave-conflict %s: no checkpoint (%v)", a.Thread, err)
			}
			for _, p := range []struct {
				field    string
				question string
				minutes  int
			}{{"question", cp.Question + " (changed)", cp.Minutes}, {"minutes", cp.Question, cp.Minutes + 1}} {
				_, err = w.ps.Plans.Save(ctx, cp.Owner, cp.OperationID, p.question, p.minutes)
				switch {
				case err == nil:
					return nil, fmt.Errorf("plansave-conflict %s: a save with operation_id %s and another %s was accepted", a.Thread, cp.OperationID, p.field)
				case !errors.Is(err, plansave.ErrConflict):
					return nil, err
				}
			}
			return &history.Outcome{Op: cp.OperationID, Outcome: "conflict-refused"}, nil
		}
	}
	return nil, fmt.Errorf("unknown action %q", a.Do)
}

func serviceOutcome(r reference.Result) *history.Outcome {
	return &history.Outcome{Op: r.OperationID, Outcome: string(r.Outcome), Revision: r.Revision}
}

func checkpointOutcome(cp plansave.Checkpoint) *history.Outcome {
	return &history.Outcome{Op: cp.OperationID, Status: string(cp.Status), Next: string(cp.Next), PlanID: cp.PlanID}
}

// warmUp reads once from every store a fresh worker process opened, before
// it takes any lease: drivers connect lazily, and a first connection (to a
// server on a loaded machine, seconds) would otherwise be paid inside the
// first lease and cost the worker its lease, so the case would measure the
// machine instead of the protocol. A long-running service has warm
// connections too. Errors are left to the real calls to report. On the
// harness clock (WorkerSpec.ClockFile) a slow call costs no lease time, so
// a worker there skips it: the reads cost each of a run's many thousand
// worker processes statements it may never use again.
func warmUp(ctx context.Context, st reference.Stores, space string) {
	if st.Ops != nil {
		_, _ = st.Ops.Get(ctx, space+"/warm-up")
	}
	if st.States != nil {
		_, _, _ = st.States.FindCurrent(ctx, space, "warm-up")
	}
	if st.Registry != nil {
		_, _ = st.Registry.FindMatches(ctx, space, "warm-up", []string{"warm-up"})
	}
	if st.Writer != nil {
		_, _ = st.Writer.ReadGraph(ctx, space)
	}
}
