package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

// WorkerOptions say how a worker injects and dies.
type WorkerOptions struct {
	// Injector decides which faults fire (pingcap/failpoint's registry,
	// armed by GO_FAILPOINTS, in a worker process).
	Injector faults.Injector
	// Crash ends the worker; in a process it is SIGKILL.
	Crash func(faults.Hit)
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

// RunWorker runs one worker's actions against the backend, recording
// everything in the case's history.
func RunWorker(ctx context.Context, spec WorkerSpec, b Backend, opt WorkerOptions) error {
	hist, err := OpenHistory(spec.History, spec.Worker, spec.Phase)
	if err != nil {
		return err
	}
	defer hist.Close()
	hist.Append(Record{Type: "start", PID: os.Getpid(), Detail: fmt.Sprintf("%d actions", len(spec.Actions))})
	rt := &faults.Runtime{
		Injector: opt.Injector,
		OnHit: func(h faults.Hit) {
			hist.Append(Record{Type: "hit", Point: h.Point, Action: h.Action.String(), PID: os.Getpid()})
		},
		Crash: opt.Crash,
	}
	w := &worker{spec: spec, hist: hist, rt: rt, backend: b}
	defer w.close()
	for i, a := range spec.Actions {
		if err := ctx.Err(); err != nil {
			return err
		}
		hist.Append(Record{Type: "action", Action: a.Do, Op: a.Op, Detail: fmt.Sprintf("#%d %s %s", i, a.Do, firstNonEmpty(a.Doc, a.Thread))})
		detail, err := w.run(ctx, a)
		r := Record{Type: "result", Action: a.Do, Detail: fmt.Sprintf("#%d %s", i, detail)}
		if err != nil {
			r.Err = err.Error()
		}
		hist.Append(r)
		if err != nil && !spec.ContinueOnError {
			hist.Append(Record{Type: "exit", Detail: "stopped after a failed action"})
			return nil
		}
	}
	hist.Append(Record{Type: "exit", Detail: "done"})
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

type worker struct {
	spec    WorkerSpec
	hist    *HistoryWriter
	rt      *faults.Runtime
	backend Backend
	stores  *reference.Stores
	ps      *PlanSaveStores
}

func (w *worker) close() {
	if w.stores != nil {
		_ = w.stores.Close()
	}
	if w.ps != nil && w.ps.Closer != nil {
		_ = w.ps.Closer.Close()
	}
}

func (w *worker) service(ctx context.Context) (*reference.Service, error) {
	if w.stores == nil {
		st, err := w.backend.Open(ctx, w.spec.Env)
		if err != nil {
			return nil, fmt.Errorf("open backend %s: %w", w.backend.Name, err)
		}
		w.stores = &st
	}
	return &reference.Service{
		Stores:         *w.stores,
		Extractor:      &reference.FakeExtractor{Log: &fileCallLog{dir: w.spec.CallDir, hist: w.hist}},
		Faults:         w.rt,
		Observer:       reference.ObserverFunc(func(e reference.Event) { w.hist.Append(Record{Type: "event", Event: &e}) }),
		Holder:         fmt.Sprintf("%s/%d", w.spec.Worker, os.Getpid()),
		LeaseTTL:       time.Duration(w.spec.LeaseTTLMillis) * time.Millisecond,
		AcquireTimeout: time.Duration(4*w.spec.LeaseTTLMillis+500) * time.Millisecond,
		BatchSize:      w.spec.BatchSize,
		Bugs:           w.spec.Bugs,
	}, nil
}

func (w *worker) workflow(ctx context.Context) (*plansave.Workflow, error) {
	if w.backend.OpenPlanSave == nil {
		return nil, fmt.Errorf("backend %s does not provide System B stores", w.backend.Name)
	}
	if w.ps == nil {
		ps, err := w.backend.OpenPlanSave(ctx, w.spec.Env)
		if err != nil {
			return nil, fmt.Errorf("open plan-save stores: %w", err)
		}
		w.ps = &ps
	}
	return &plansave.Workflow{Checkpoints: w.ps.Checkpoints, Plans: w.ps.Plans, Faults: w.rt,
		NewOperationID: func(thread string) string { return "op-" + w.spec.Env.Namespace + "-" + thread }}, nil
}

func (w *worker) run(ctx context.Context, a Action) (string, error) {
	switch a.Do {
	case "ingest", "retract", "resume", "recover":
		s, err := w.service(ctx)
		if err != nil {
			return "", err
		}
		switch a.Do {
		case "ingest":
			r, err := s.Ingest(ctx, reference.IngestRequest{Space: w.spec.Space, DocumentID: a.Doc, OperationID: a.Op, Content: a.Content})
			return fmt.Sprintf("%s %s rev %d", r.OperationID, r.Outcome, r.Revision), err
		case "retract":
			r, err := s.Retract(ctx, w.spec.Space, a.Doc)
			return fmt.Sprintf("%s %s rev %d", r.OperationID, r.Outcome, r.Revision), err
		case "resume":
			r, err := s.Resume(ctx, a.Op)
			return fmt.Sprintf("%s %s rev %d", r.OperationID, r.Outcome, r.Revision), err
		default:
			rounds := a.Rounds
			if rounds <= 0 {
				rounds = 10
			}
			rec := &reference.Recovery{Service: s, ClaimTTL: time.Duration(w.spec.ClaimTTLMillis) * time.Millisecond,
				MaxAttempts: 4, BaseBackoff: 2 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
				Rand: rand.New(rand.NewPCG(uint64(w.spec.Seed), uint64(w.spec.Phase)))}
			n, quiet, err := rec.RunUntilQuiet(ctx, rounds)
			if err == nil && !quiet {
				err = fmt.Errorf("recovery not quiet after %d rounds", n)
			}
			return fmt.Sprintf("rounds=%d quiet=%v", n, quiet), err
		}
	case "plansave-start", "plansave-invoke", "plansave-conflict":
		wf, err := w.workflow(ctx)
		if err != nil {
			return "", err
		}
		switch a.Do {
		case "plansave-start":
			cp, err := wf.Start(ctx, a.Thread, a.Owner, a.Question, a.Minutes)
			return fmt.Sprintf("%s %s next=%s", cp.OperationID, cp.Status, cp.Next), err
		case "plansave-invoke":
			approve := a.Approve
			cp, err := wf.Invoke(ctx, a.Thread, &approve)
			return fmt.Sprintf("%s %s plan=%d", cp.OperationID, cp.Status, cp.PlanID), err
		default:
			// A retry of the same operation_id with other content must fail loudly.
			cp, ok, err := w.ps.Checkpoints.Load(ctx, a.Thread)
			if err != nil || !ok {
				return "", fmt.Errorf("plansave-conflict %s: no checkpoint (%v)", a.Thread, err)
			}
			_, err = w.ps.Plans.Save(ctx, cp.Owner, cp.OperationID, cp.Question+" (changed)", cp.Minutes+1)
			if errors.Is(err, plansave.ErrConflict) {
				return "conflict refused", nil
			}
			if err == nil {
				return "", fmt.Errorf("plansave-conflict %s: a save with operation_id %s and other content was accepted", a.Thread, cp.OperationID)
			}
			return "", err
		}
	}
	return "", fmt.Errorf("unknown action %q", a.Do)
}
