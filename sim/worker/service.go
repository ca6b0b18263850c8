package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc"
	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// A service run through the service protocol (docs/service-protocol.md)
// instead of the reference: a worker starts the service's command as its
// child and sends it the worker's intents; the harness keeps the intent,
// the model, the clock, the crash windows, its own stores (those the
// service declares it takes from the harness) and its eyes on the calls
// the service reports to its own stores.

// ServiceSpec names the service of a run (Config.Service,
// WorkerSpec.Service).
type ServiceSpec struct {
	// Command is the service's command line; WorkDir the folder it runs
	// in ("" = the harness's).
	Command string `json:"command"`
	WorkDir string `json:"workDir,omitempty"`
	// Timeout bounds the service's silence within a request and its start
	// (0: the protocol's defaults, 10 s and 60 s).
	Timeout time.Duration `json:"timeout,omitempty"`
	// Declared is what the service declared when the run began
	// (ProbeService): every process must declare the same.
	Declared serviceproc.Declared `json:"declared"`
}

// ServiceProtocolExit is the exit code of a worker whose service broke
// the service protocol (or did not start): the case is undecided.
const ServiceProtocolExit = 3

// ServiceDir is the service's folder of a case: inside the case's data
// directory, so on its lazy mount where the power can be cut.
func ServiceDir(env CaseEnv) string { return filepath.Join(env.Dir, "service") }

// MakeServiceDir creates the case's service folder, durably: hello says
// it exists, so a power loss must not take it (its name is synced into
// the data directory before the service writes a file in it).
func MakeServiceDir(env CaseEnv) error {
	dir := ServiceDir(env)
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("service folder: %w", err)
	}
	parent, err := os.Open(filepath.Dir(dir))
	if err != nil {
		return fmt.Errorf("service folder: %w", err)
	}
	defer parent.Close()
	if err := parent.Sync(); err != nil {
		return fmt.Errorf("service folder: syncing %s: %w", parent.Name(), err)
	}
	return nil
}

// serviceRun is a worker's service process and what serves its callbacks.
type serviceRun struct {
	svc  *serviceproc.Service
	decl serviceproc.Declared
	// harness are the harness's stores the service declared, behind the
	// harness's eyes and gate.
	harness storeproc.Served
	model   reference.Extractor
	w       *worker
}

// service starts the worker's service process (once) and the harness's
// stores it takes.
func (w *worker) serviceRun(ctx context.Context) (*serviceRun, error) {
	if w.svcRun != nil && !w.svcRun.svc.Broken() {
		return w.svcRun, nil
	}
	spec := w.spec.Service
	decl := spec.Declared
	if w.stores == nil {
		st, err := w.serviceStores(ctx, decl)
		if err != nil {
			return nil, err
		}
		w.stores = &st
	}
	run := &serviceRun{decl: decl, w: w}
	if w.ps == nil && (decl.HarnessStore(storeproc.StoreCheckpoints) || decl.HarnessStore(storeproc.StorePlans)) && w.backend.OpenPlanSave != nil {
		ps, err := w.backend.OpenPlanSave(ctx, w.spec.Env)
		if err != nil {
			return nil, fmt.Errorf("open the harness's plan-save stores: %w", err)
		}
		w.ps = &ps
	}
	run.harness = storeproc.Served{Stores: w.observed(*w.stores)}
	if w.ps != nil {
		run.harness.Checkpoints = w.ps.Checkpoints
		run.harness.Plans = &seenPlans{PlanStore: w.ps.Plans, w: w, thread: &w.thread}
	}
	var calls reference.CallLog = &fileCallLog{dir: w.spec.CallDir, hist: w.hist}
	if w.opt.CallLog != nil {
		calls = w.opt.CallLog
	}
	run.model = &seenModel{Extractor: &reference.FakeExtractor{Log: calls}, w: w}
	bugs := BugNames(w.spec.Bugs)
	if err := MakeServiceDir(w.spec.Env); err != nil {
		return nil, err
	}
	ready := NoteOpen(w.spec.StartsFile)
	svc, err := serviceproc.Start(ctx, serviceproc.Options{Command: spec.Command, WorkDir: spec.WorkDir, LogDir: w.spec.Env.Logs, TempDir: w.spec.Env.TempDir,
		Timeout: spec.Timeout, HelloTimeout: spec.Timeout, Want: &decl, OnProtocolError: serviceBroke, RetryStart: w.noteRetry,
		Hello: serviceproc.Hello{Role: serviceproc.RoleWorker, Dir: ServiceDir(w.spec.Env), Namespace: w.spec.Env.Namespace, Space: w.spec.Space,
			Holder: fmt.Sprintf("%s/%d", w.spec.Worker, w.pid), Bugs: bugs, LeaseTTLMillis: w.spec.LeaseTTLMillis, ClaimTTLMillis: w.spec.ClaimTTLMillis,
			BatchSize: w.spec.BatchSize, Seed: w.spec.Seed*1000 + int64(w.spec.Phase)}})
	ready()
	if err != nil {
		return nil, err
	}
	run.svc = svc
	w.svcRun = run
	return run, nil
}

// noteRetry notes a service start of the worker's that got no hello
// within the start timeout and is tried once more (serviceproc's
// RetryStart): the case's result counts it (WorkerResult.StartRetries).
func (w *worker) noteRetry(*storeproc.ProtocolError) { NoteRetry(w.spec.StartsFile) }

// BugNames are the mutants' names, as hello sends them.
func BugNames(bugs []reference.Bug) []string {
	out := make([]string, 0, len(bugs))
	for _, b := range bugs {
		out = append(out, string(b))
	}
	return out
}

// serviceStores are the stores the harness reads and serves in a service
// run: its own backend's for the stores the service takes from the
// harness, and the service's read side (a reader process, role read) for
// the service's own.
func (w *worker) serviceStores(ctx context.Context, decl serviceproc.Declared) (reference.Stores, error) {
	var st reference.Stores
	var closers []func() error
	for _, s := range []string{storeproc.StoreOperations, storeproc.StoreStates, storeproc.StoreRegistry, storeproc.StoreGraph, storeproc.StoreLocks} {
		if decl.HarnessStore(s) {
			ready := NoteOpen(w.spec.StartsFile)
			hs, err := w.backend.Open(ctx, w.spec.Env)
			ready()
			if err != nil {
				return st, fmt.Errorf("open backend %s: %w", w.backend.Name, err)
			}
			st = hs
			closers = append(closers, hs.Close)
			break
		}
	}
	own, _, _ := storeproc.Over(&serviceReader{w: w}, storeproc.Lax, decl.OwnStores())
	st = WithOwn(st, own, decl.OwnStores())
	st.Closer = closeAll(append(closers, w.closeReader))
	return st, nil
}

// closeAll is an io.Closer that runs every close.
type closeAll []func() error

func (c closeAll) Close() error {
	var errs []error
	for _, f := range c {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}

// serviceReader is the worker's reader of the service's own stores: a
// second process of the service's command (role read), started when the
// harness first reads, restarted after a read that failed. A read waits
// 2 s at most (the worker-role process may hold a lock across a
// callback): the harness then records what it read as unknown.
type serviceReader struct {
	w   *worker
	svc *serviceproc.Service
}

// readTimeout bounds one read of the reader.
const readTimeout = 2 * time.Second

func (r *serviceReader) Call(ctx context.Context, op string, args json.RawMessage) (json.RawMessage, error) {
	if r.svc == nil || r.svc.Broken() {
		if err := MakeServiceDir(r.w.spec.Env); err != nil {
			return nil, err
		}
		spec := r.w.spec.Service
		decl := spec.Declared
		// Its start, as the worker's service's, is out of the worker's
		// deadline (Backend.StartTimeout).
		ready := NoteOpen(r.w.spec.StartsFile)
		s, err := serviceproc.Start(ctx, serviceproc.Options{Command: spec.Command, WorkDir: spec.WorkDir, LogDir: r.w.spec.Env.Logs, TempDir: r.w.spec.Env.TempDir,
			Timeout: readTimeout, HelloTimeout: spec.Timeout, Want: &decl, OnProtocolError: serviceBroke, RetryStart: r.w.noteRetry,
			Hello: serviceproc.Hello{Role: serviceproc.RoleRead, Dir: ServiceDir(r.w.spec.Env), Namespace: r.w.spec.Env.Namespace, Space: r.w.spec.Space,
				Holder: fmt.Sprintf("%s/%d/reader", r.w.spec.Worker, r.w.pid), LeaseTTLMillis: r.w.spec.LeaseTTLMillis, ClaimTTLMillis: r.w.spec.ClaimTTLMillis,
				BatchSize: r.w.spec.BatchSize, Seed: r.w.spec.Seed}})
		ready()
		if err != nil {
			return nil, err
		}
		r.svc = s
		r.w.reader = r
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	return r.svc.Call(ctx, op, args)
}

func (w *worker) closeReader() error {
	if w.reader != nil && w.reader.svc != nil {
		w.reader.svc.Close()
	}
	return nil
}

// observedOwn wraps the replay of the service's calls to its own stores
// as observed wraps the stores the reference uses, without the lease
// faults: the service never sees what they would answer (they apply to
// the harness's locks only).
func (w *worker) observedOwn(st reference.Stores) reference.Stores {
	st.Ops = &seenOps{OperationStore: st.Ops, w: w}
	st.States = &seenStates{DocumentStateStore: st.States, w: w}
	st.Writer = &seenWriter{GraphWriter: st.Writer, w: w}
	return stallable(st, w.rt, w.opt.DetachStores, w.mark)
}

// serviceBroke ends a worker process whose service broke the protocol:
// the conversation cannot be trusted, so the case must not be judged on
// it. Outside a worker process (the supervisor's read) the error is
// returned as it is.
func serviceBroke(ctx context.Context, err *storeproc.ProtocolError) {
	if faults.RuntimeFrom(ctx) == nil || !InWorkerProcess() {
		return
	}
	what := "broke the service protocol"
	if err.NoStart {
		what = "did not start"
	}
	fmt.Fprintf(os.Stderr, "crashmatrix worker: the service %s: %v\n", what, err)
	os.Exit(ServiceProtocolExit)
}

// InWorkerProcess reports whether this process is a worker the
// supervisor started: it leads its own process group and has
// GO_FAILPOINTS set (to its arms, possibly none). In-process workers
// share the supervisor's process, which must not exit.
func InWorkerProcess() bool {
	_, armed := os.LookupEnv("GO_FAILPOINTS")
	return armed && syscall.Getpgrp() == os.Getpid()
}

// runService runs one action through the service.
func (w *worker) runService(ctx context.Context, a catalogue.Action) (*history.Outcome, error) {
	run, err := w.serviceRun(ctx)
	if err != nil {
		return nil, err
	}
	h := serviceHandler{run}
	switch a.Do {
	case "ingest", "retract", "resume", "recover":
		if a.Op != "" {
			a.Op = OpID(w.spec.Space, a.Op)
		}
		if a.Do == "ingest" || a.Do == "retract" {
			w.intent(ctx, a)
		}
		var args any
		switch a.Do {
		case "ingest":
			args = map[string]any{"space": w.spec.Space, "documentId": a.Doc, "operationId": a.Op, "content": a.Content}
		case "retract":
			args = map[string]any{"space": w.spec.Space, "documentId": a.Doc}
		case "resume":
			args = map[string]any{"operationId": a.Op}
		default:
			rounds := a.Rounds
			if rounds <= 0 {
				rounds = 10
			}
			var res serviceproc.RecoverResult
			if err := run.svc.Request(ctx, "recover", map[string]any{"space": w.spec.Space, "rounds": rounds, "claimTtlMillis": w.spec.ClaimTTLMillis}, h, &res); err != nil {
				return nil, err
			}
			if !res.Quiet {
				err = fmt.Errorf("recovery not quiet after %d rounds", res.Rounds)
			}
			return &history.Outcome{Rounds: res.Rounds, Quiet: res.Quiet}, err
		}
		var res serviceproc.Result
		if err := run.svc.Request(ctx, a.Do, args, h, &res); err != nil {
			return nil, err
		}
		return &history.Outcome{Op: res.OperationID, Outcome: res.Outcome, Revision: res.Revision}, nil
	case "plansave-start", "plansave-invoke":
		a.Thread = ThreadID(w.spec.Space, a.Thread)
		w.thread = a.Thread
		var res serviceproc.ThreadResult
		if a.Do == "plansave-start" {
			w.seen(history.Observation{What: history.SeenIntent, Do: a.Do, Thread: a.Thread, Owner: a.Owner})
			err = run.svc.Request(ctx, "plansave.start", map[string]any{"threadId": a.Thread, "owner": a.Owner, "question": a.Question, "minutes": a.Minutes}, h, &res)
		} else {
			err = run.svc.Request(ctx, "plansave.invoke", map[string]any{"threadId": a.Thread, "approve": a.Approve}, h, &res)
		}
		if err != nil {
			return nil, err
		}
		return &history.Outcome{Op: res.OperationID, Status: res.Status, Next: res.Next, PlanID: res.PlanID}, nil
	case "plansave-conflict":
		a.Thread = ThreadID(w.spec.Space, a.Thread)
		w.thread = a.Thread
		return w.serviceConflict(ctx, run, a.Thread)
	}
	return nil, fmt.Errorf("unknown action %q", a.Do)
}

// serviceConflict is plansave-conflict through the service: a save under
// the thread's operation_id with other content must fail loudly.
func (w *worker) serviceConflict(ctx context.Context, run *serviceRun, thread string) (*history.Outcome, error) {
	var cp struct {
		Checkpoint *struct {
			Owner, OperationID, Question string
			Minutes                      int
		} `json:"checkpoint"`
	}
	var raw json.RawMessage
	var err error
	if run.decl.HarnessStore(storeproc.StoreCheckpoints) {
		var res any
		if res, err = storeproc.Serve(ctx, run.harness, storeproc.Strict, "checkpoints.load", mustJSON(map[string]any{"threadId": thread})); err == nil {
			raw = mustJSON(res)
		}
	} else {
		raw, err = run.svc.Call(ctx, "checkpoints.load", mustJSON(map[string]any{"threadId": thread}))
	}
	if err == nil {
		err = json.Unmarshal(raw, &cp)
	}
	if err != nil || cp.Checkpoint == nil {
		return nil, fmt.Errorf("plansave-conflict %s: no checkpoint (%v)", thread, err)
	}
	c := cp.Checkpoint
	for _, p := range []struct {
		field    string
		question string
		minutes  int
	}{{"question", c.Question + " (changed)", c.Minutes}, {"minutes", c.Question, c.Minutes + 1}} {
		var res struct {
			ID int64 `json:"id"`
		}
		err := run.svc.Request(ctx, "plansave.save", map[string]any{"owner": c.Owner, "operationId": c.OperationID, "question": p.question, "minutes": p.minutes}, serviceHandler{run}, &res)
		var ie *serviceproc.IntentError
		switch {
		case err == nil:
			return nil, fmt.Errorf("plansave-conflict %s: a save with operation_id %s and another %s was accepted", thread, c.OperationID, p.field)
		case !errors.As(err, &ie) || ie.Code != "plan_conflict":
			return nil, err
		}
	}
	return &history.Outcome{Op: c.OperationID, Outcome: "conflict-refused"}, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// serviceHandler answers a service's callbacks.
type serviceHandler struct{ run *serviceRun }

func (h serviceHandler) Model(ctx context.Context, req serviceproc.ModelRequest) (reference.Extraction, error) {
	return h.run.model.Extract(ctx, reference.ExtractRequest{Space: req.Space, DocumentID: req.DocumentID, OperationID: req.OperationID, Content: req.Content})
}

func (h serviceHandler) Now() int64 {
	if h.run.w.opt.Now != nil {
		return h.run.w.opt.Now()
	}
	return time.Now().UnixMilli()
}

func (h serviceHandler) Sleep(ctx context.Context, millis int64) int64 {
	d := time.Duration(millis) * time.Millisecond
	if h.run.w.opt.Sleep != nil {
		_ = h.run.w.opt.Sleep(ctx, d)
	} else {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return h.Now()
}

func (h serviceHandler) Store(ctx context.Context, op string, args json.RawMessage) (any, error) {
	return storeproc.Serve(ctx, h.run.harness, storeproc.Strict, op, args)
}

// Call replays a call the service makes to its own store through the
// harness's eyes and gate: the store wrappers record what reached the
// store (as for the reference's calls), the gate may crash, fail or stall
// the service before it, and the store the wrappers call is the service's
// report of what its store answered.
func (h serviceHandler) Call(ctx context.Context, op string, args json.RawMessage, run func() (json.RawMessage, error)) error {
	ran := false
	st, cps, plans := storeproc.Over(replay(func() (json.RawMessage, error) { ran = true; return run() }), storeproc.Lax, []string{storeproc.StoreOfOp(op)})
	// System B's calls are marked as System A's are (observedOwn's gate),
	// so that the durable-step sweep counts the service's own checkpoint
	// and plan files' steps against them.
	var ps PlanSaveStores
	if cps != nil {
		ps.Checkpoints = cps
	}
	if plans != nil {
		ps.Plans = &seenPlans{PlanStore: plans, w: h.run.w, thread: &h.run.w.thread}
	}
	ps = markedPlanSave(ps, h.run.w.mark)
	served := storeproc.Served{Stores: h.run.w.observedOwn(st), Checkpoints: ps.Checkpoints, Plans: ps.Plans}
	_, err := storeproc.Serve(ctx, served, storeproc.Lax, op, args)
	if !ran && err != nil && !faults.IsInjected(err) {
		return &serviceproc.BadCall{Err: err}
	}
	return err
}

// replay is a storeproc.Caller whose one call is the service's own.
type replay func() (json.RawMessage, error)

func (r replay) Call(context.Context, string, json.RawMessage) (json.RawMessage, error) { return r() }

func (h serviceHandler) Event(e reference.Event) {
	h.run.w.hist.Append(history.Record{Kind: history.Event, Event: &e})
}
