// Package refservice is crashmatrix's reference service as a speaker of
// the service protocol (docs/service-protocol.md), run as a team's
// service in another language is run: every intent, model call, crash
// window, clock reading and store call crosses the pipe. Its stores are
// all the harness's (store callbacks); it reports its events. crashmatrix
// certifies it, and catches its mutants (--bug), as it does the reference
// in process: the proof that the protocol loses no judging power
// (examples/service-go is the command).
package refservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc"
	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

// everyStore are the stores the service takes from the harness: all.
var everyStore = []string{storeproc.StoreOperations, storeproc.StoreStates, storeproc.StoreRegistry, storeproc.StoreGraph, storeproc.StoreLocks,
	storeproc.StoreCheckpoints, storeproc.StorePlans}

// Options choose how the reference meets the harness.
type Options struct {
	// OwnStores keeps every store in the service's own SQLite files in
	// hello's dir, as a team's service keeps its own: it reports each call
	// to them (call, done) and serves their read side; otherwise every
	// store is the harness's (store callbacks).
	OwnStores bool
	// Systems are the systems it declares and serves (nil: both); an
	// intent of another is refused (unsupported), as a team's service
	// that implements only one answers, while its stores stay the
	// harness's, System B's included.
	Systems []string
}

// BugTwoTransactionCreate is the own-stores service's broken variant of
// its own (a hello bug that is no mutant of the reference): its operation
// store commits a new operation's row and its plan in two transactions,
// each synced, with no window declared between them
// (sqlite.Options.PlanApart). Only the durable-step sweep of its files
// crashes it between the two; recovery then finds an operation without
// its plan (I5).
const BugTwoTransactionCreate = "two-transaction-create"

// BugTwoTransactionPlanSave is the own-stores service's System B defect
// of its own: its plan store keeps each row and its (owner, operation_id)
// key in two tables and commits them in two synced transactions, no window
// declared between them (sqlite.TwoStepPlans apart). Only the durable-step
// sweep of its files crashes it between the two; the resumed save then
// finds no key and inserts a second row (I8).
const BugTwoTransactionPlanSave = "two-transaction-plan-save"

// Declared is what the service declares in hello.
func (o Options) Declared() serviceproc.Declared {
	var windows []string
	for _, s := range faults.Catalogue {
		if o.OwnStores && s.Point == faults.LeaseAcquire {
			continue // its lease faults act on the harness's locks only
		}
		windows = append(windows, string(s.Point))
	}
	d := serviceproc.Declared{Protocol: serviceproc.Protocol, Name: "crashmatrix-reference", Systems: []string{serviceproc.SystemIngestion, serviceproc.SystemPlanSave},
		Windows: windows, HarnessStores: everyStore, Reports: []string{serviceproc.ReportEvents}, Clock: "harness"}
	if o.OwnStores {
		d.Name, d.HarnessStores, d.Reports = "crashmatrix-reference-own-stores", []string{}, []string{serviceproc.ReportEvents, serviceproc.ReportCalls}
	}
	if o.Systems != nil {
		d.Name, d.Systems = d.Name+"-"+strings.Join(o.Systems, "-"), o.Systems
	}
	return d
}

// Serve speaks the protocol over in and out until in ends, every store
// the harness's.
func Serve(in io.Reader, out io.Writer) error { return Options{}.Serve(in, out) }

// Serve speaks the protocol over in and out until in ends.
func (o Options) Serve(in io.Reader, out io.Writer) error {
	sp := serviceproc.NewSpeaker(in, out)
	var s *session
	for {
		req, err := sp.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if req.Op == "hello" {
			var h serviceproc.Hello
			if err := json.Unmarshal(req.Args, &h); err != nil {
				return err
			}
			if s, err = newSession(sp, h, o); err != nil {
				_ = sp.ReplyError(storeproc.WireError{Code: "unsupported", Definite: true, Message: err.Error()})
				continue
			}
			_ = sp.Reply(o.Declared())
			continue
		}
		if s == nil {
			_ = sp.ReplyError(storeproc.WireError{Code: "unsupported", Definite: true, Message: "hello first"})
			continue
		}
		if sys := systemOf(req.Op); sys != "" && !slices.Contains(o.Declared().Systems, sys) {
			_ = sp.ReplyError(storeproc.WireError{Code: "unsupported", Definite: true, Message: req.Op + ": this service does not implement " + sys})
			continue
		}
		res, err := s.do(context.Background(), req)
		if err != nil {
			w := storeproc.WireErrorOf(err)
			if w.Code == "unavailable" || w.Code == "permanent" {
				w.Code = "failed"
			}
			_ = sp.ReplyError(w)
			continue
		}
		_ = sp.Reply(res)
	}
}

// systemOf is the system whose intent op is ("" for the read side).
func systemOf(op string) string {
	switch {
	case strings.HasPrefix(op, "plansave."):
		return serviceproc.SystemPlanSave
	case slices.Contains([]string{"ingest", "retract", "resume", "recover"}, op):
		return serviceproc.SystemIngestion
	}
	return ""
}

// session is one greeted process: the reference over the harness.
type session struct {
	// own are the service's own stores (Options.OwnStores), nil fields
	// otherwise.
	own   storeproc.Served
	hello serviceproc.Hello
	svc   *reference.Service
	wf    *plansave.Workflow
	rand  *rand.Rand
}

func newSession(sp *serviceproc.Speaker, h serviceproc.Hello, o Options) (*session, error) {
	if h.Protocol != serviceproc.Protocol {
		return nil, fmt.Errorf("protocol %q: this service speaks %s", h.Protocol, serviceproc.Protocol)
	}
	var bugs []reference.Bug
	var wfBugs []plansave.Bug
	planApart, keyApart := false, false
	for _, b := range h.Bugs {
		if b == BugTwoTransactionCreate || b == BugTwoTransactionPlanSave {
			if !o.OwnStores {
				return nil, fmt.Errorf("bug %q: a defect of the service's own stores (--own-stores)", b)
			}
			planApart = planApart || b == BugTwoTransactionCreate
			keyApart = keyApart || b == BugTwoTransactionPlanSave
			continue
		}
		if !slices.Contains(reference.Bugs, reference.Bug(b)) {
			return nil, fmt.Errorf("bug %q: not a mutant of the reference", b)
		}
		bugs = append(bugs, reference.Bug(b))
		if reference.Bug(b).System() == faults.PlanSave {
			wfBugs = append(wfBugs, plansave.Bug(b))
		}
	}
	s := &session{hello: h, rand: rand.New(rand.NewPCG(uint64(h.Seed), 0))}
	var via storeproc.Caller = sp
	if o.OwnStores {
		if err := s.openOwn(h.Dir, sqlite.Options{PlanApart: planApart}, keyApart); err != nil {
			return nil, err
		}
		via = ownCaller{sp: sp, served: s.own}
	}
	st, cps, plans := storeproc.Over(via, storeproc.Strict, everyStore)
	rt := sp.Runtime(o.Declared().Windows)
	ttl := time.Duration(h.LeaseTTLMillis) * time.Millisecond
	s.svc = &reference.Service{Stores: st, Extractor: sp, Faults: rt, Observer: sp, Now: sp.Now, Sleep: sp.Sleep, Holder: h.Holder,
		LeaseTTL: ttl, AcquireTimeout: 4*ttl + 500*time.Millisecond, BatchSize: h.BatchSize, Bugs: bugs}
	s.wf = &plansave.Workflow{Checkpoints: cps, Plans: plans, Faults: rt, NewOperationID: func(thread string) string { return "op-" + thread }, Bugs: wfBugs}
	return s, nil
}

// do runs one request.
func (s *session) do(ctx context.Context, req serviceproc.Request) (any, error) {
	var a struct {
		Space, DocumentID, OperationID, Content string
		Rounds                                  int
		ClaimTTLMillis                          int64
		ThreadID, Owner, Question               string
		Minutes                                 int
		Approve                                 bool
	}
	if err := json.Unmarshal(req.Args, &a); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", reference.ErrInvalidArgument, req.Op, err)
	}
	switch req.Op {
	case "ingest":
		return result(s.svc.Ingest(ctx, reference.IngestRequest{Space: a.Space, DocumentID: a.DocumentID, OperationID: a.OperationID, Content: a.Content}))
	case "retract":
		return result(s.svc.Retract(ctx, a.Space, a.DocumentID))
	case "resume":
		return result(s.svc.Resume(ctx, a.OperationID))
	case "recover":
		rec := &reference.Recovery{Service: s.svc, Space: a.Space, ClaimTTL: time.Duration(a.ClaimTTLMillis) * time.Millisecond,
			MaxAttempts: 4, BaseBackoff: 2 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Rand: s.rand,
			Sleep: func(ctx context.Context, d time.Duration) { _ = s.svc.Sleep(ctx, d) }}
		n, quiet, err := rec.RunUntilQuiet(ctx, a.Rounds)
		if err != nil {
			return nil, err
		}
		return serviceproc.RecoverResult{Rounds: n, Quiet: quiet}, nil
	case "plansave.start":
		return thread(s.wf.Start(ctx, a.ThreadID, a.Owner, a.Question, a.Minutes))
	case "plansave.invoke":
		approve := a.Approve
		cp, err := s.wf.Invoke(ctx, a.ThreadID, &approve)
		if errors.Is(err, plansave.ErrNotApproved) {
			return nil, &storeproc.Error{Op: req.Op, Code: "not_approved", Definite: true, Message: err.Error()}
		}
		return thread(cp, err)
	case "plansave.save":
		id, err := s.wf.Plans.Save(ctx, a.Owner, a.OperationID, a.Question, a.Minutes)
		return map[string]any{"id": id}, err
	}
	if s.own.Ops != nil {
		// The read side of its own stores (section 11).
		return storeproc.Serve(ctx, s.own, storeproc.Strict, req.Op, req.Args)
	}
	return nil, &storeproc.Error{Op: req.Op, Code: "unsupported", Definite: true, Message: "every store of this service is the harness's: it has no read side"}
}

// openOwn opens the service's own stores in dir: SQLite files of its own;
// keyApart takes the plan store of BugTwoTransactionPlanSave (and a reader
// finding its file reads it).
func (s *session) openOwn(dir string, opts sqlite.Options, keyApart bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	st, err := sqlite.Open(filepath.Join(dir, "service.db"), opts)
	if err != nil {
		return err
	}
	ps, err := sqlite.OpenPlanSave(dir, true)
	if err != nil {
		return err
	}
	s.own = storeproc.Served{Stores: st, Checkpoints: ps, Plans: ps}
	// The supervisor's reader is greeted without bugs: it reads the
	// variant's plan store where the variant made one.
	if _, statErr := os.Stat(filepath.Join(dir, "twostep-plans.db")); keyApart || statErr == nil {
		if s.own.Plans, err = sqlite.OpenTwoStepPlans(dir, keyApart); err != nil {
			return err
		}
	}
	return nil
}

// ownCaller makes the service's calls to its own stores, each reported to
// the harness (call, done).
type ownCaller struct {
	sp     *serviceproc.Speaker
	served storeproc.Served
}

func (o ownCaller) Call(ctx context.Context, op string, args json.RawMessage) (json.RawMessage, error) {
	return o.sp.Own(op, args, func() (json.RawMessage, error) {
		res, err := storeproc.Serve(ctx, o.served, storeproc.Strict, op, args)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	})
}

func result(r reference.Result, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return serviceproc.Result{OperationID: r.OperationID, Outcome: string(r.Outcome), Revision: r.Revision}, nil
}

func thread(cp plansave.Checkpoint, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return serviceproc.ThreadResult{OperationID: cp.OperationID, Status: cp.Status, Next: cp.Next, PlanID: cp.PlanID}, nil
}
