// Command service-go is crashmatrix's reference service run through the
// service protocol (docs/service-protocol.md), as a team's service in
// another language is run: every intent, model call, crash window, clock
// reading and store call crosses the pipe. Its stores are all the
// harness's (store callbacks); it reports its events. crashmatrix
// certifies it, and catches its mutants (--bug), as it does the reference
// in process: the proof that the protocol loses no judging power.
//
//	crashmatrix certify --service-cmd "go run ./examples/service-go"
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc"
	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

func main() {
	if err := Serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "service-go:", err)
		os.Exit(1)
	}
}

// everyStore are the stores the service takes from the harness: all.
var everyStore = []string{storeproc.StoreOperations, storeproc.StoreStates, storeproc.StoreRegistry, storeproc.StoreGraph, storeproc.StoreLocks,
	storeproc.StoreCheckpoints, storeproc.StorePlans}

// Declared is what the service declares in hello.
func Declared() serviceproc.Declared {
	var windows []string
	for _, s := range faults.Catalogue {
		windows = append(windows, string(s.Point))
	}
	return serviceproc.Declared{Protocol: serviceproc.Protocol, Name: "crashmatrix-reference", Systems: []string{serviceproc.SystemIngestion, serviceproc.SystemPlanSave},
		Windows: windows, HarnessStores: everyStore, Reports: []string{serviceproc.ReportEvents}, Clock: "harness"}
}

// Serve speaks the protocol over in and out until in ends.
func Serve(in io.Reader, out io.Writer) error {
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
			if s, err = newSession(sp, h); err != nil {
				_ = sp.ReplyError(storeproc.WireError{Code: "unsupported", Definite: true, Message: err.Error()})
				continue
			}
			_ = sp.Reply(Declared())
			continue
		}
		if s == nil {
			_ = sp.ReplyError(storeproc.WireError{Code: "unsupported", Definite: true, Message: "hello first"})
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

// session is one greeted process: the reference over the harness.
type session struct {
	hello serviceproc.Hello
	svc   *reference.Service
	wf    *plansave.Workflow
	rand  *rand.Rand
}

func newSession(sp *serviceproc.Speaker, h serviceproc.Hello) (*session, error) {
	if h.Protocol != serviceproc.Protocol {
		return nil, fmt.Errorf("protocol %q: this service speaks %s", h.Protocol, serviceproc.Protocol)
	}
	var bugs []reference.Bug
	var wfBugs []plansave.Bug
	for _, b := range h.Bugs {
		if !slices.Contains(reference.Bugs, reference.Bug(b)) {
			return nil, fmt.Errorf("bug %q: not a mutant of the reference", b)
		}
		bugs = append(bugs, reference.Bug(b))
		if reference.Bug(b).System() == faults.PlanSave {
			wfBugs = append(wfBugs, plansave.Bug(b))
		}
	}
	st, cps, plans := storeproc.Over(sp, storeproc.Strict, everyStore)
	rt := sp.Runtime()
	ttl := time.Duration(h.LeaseTTLMillis) * time.Millisecond
	s := &session{hello: h, rand: rand.New(rand.NewPCG(uint64(h.Seed), 0))}
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
	return nil, &storeproc.Error{Op: req.Op, Code: "unsupported", Definite: true, Message: "every store of this service is the harness's: it has no read side"}
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
