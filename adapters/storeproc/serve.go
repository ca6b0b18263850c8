package storeproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

// Served are the Go stores Serve answers store protocol requests with; a
// nil field is a store it does not serve (unsupported).
type Served struct {
	reference.Stores
	Checkpoints plansave.CheckpointStore
	Plans       plansave.PlanStore
}

// Serve answers one store protocol request (docs/store-protocol.md,
// section 4) with Go stores: the other side of a Client. It decodes args
// as the protocol spells them, calls the store and returns the result
// object to encode; an error is the store's (WireErrorOf spells it). A plan
// in ops.create is decoded without recomputing its fingerprint in Lax
// mode, and checked against it in Strict mode.
func Serve(ctx context.Context, s Served, mode Mode, op string, args json.RawMessage) (any, error) {
	store, _, _ := strings.Cut(op, ".")
	if !s.serves(store) {
		return nil, &Error{Op: op, Code: "unsupported", Definite: true, Message: "no " + storeOf(store) + " store is served here"}
	}
	var a serveArgs
	if len(args) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", reference.ErrInvalidArgument, op, err)
		}
	}
	switch op {
	case "ops.create":
		want := a.Operation.PlanFingerprint
		if mode == Lax {
			want = ""
		}
		plan, err := reference.DecodePlan([]byte(a.Plan), want)
		if err != nil {
			return nil, fmt.Errorf("%w: ops.create: %w", reference.ErrInvalidArgument, err)
		}
		created, err := s.Ops.CreateIfAbsent(ctx, a.Operation, plan)
		return map[string]any{"created": created}, err
	case "ops.get":
		op, err := s.Ops.Get(ctx, a.OperationID)
		return map[string]any{"operation": op}, err
	case "ops.getPlan":
		p, err := s.Ops.GetPlan(ctx, a.OperationID)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(p)
		return map[string]any{"plan": string(b), "fingerprint": reference.Fingerprint(p)}, err
	case "ops.cas":
		var cas struct{ Expected, Next reference.Operation }
		if err := json.Unmarshal(args, &cas); err != nil {
			return nil, fmt.Errorf("%w: ops.cas: %v", reference.ErrInvalidArgument, err)
		}
		ok, err := s.Ops.CompareAndSet(ctx, cas.Expected, cas.Next)
		return map[string]any{"swapped": ok}, err
	case "ops.listRecoverable":
		ops, err := s.Ops.ListRecoverable(ctx, a.Limit)
		return map[string]any{"operations": nonNil(ops)}, err
	case "ops.list":
		ops, err := s.Ops.List(ctx)
		return map[string]any{"operations": nonNil(ops)}, err
	case "ops.claim":
		ok, err := s.Ops.Claim(ctx, a.OperationID, a.Holder, a.Now, a.TTLMillis)
		return map[string]any{"claimed": ok}, err
	case "ops.releaseClaim":
		ok, err := s.Ops.ReleaseClaim(ctx, a.OperationID, a.Holder)
		return map[string]any{"released": ok}, err
	case "states.findCurrent":
		st, ok, err := s.States.FindCurrent(ctx, a.Space, a.DocumentID)
		return stateResultOf(st, ok), err
	case "states.findByOperationId":
		st, ok, err := s.States.FindByOperationID(ctx, a.Space, a.DocumentID, a.OperationID)
		return stateResultOf(st, ok), err
	case "states.cas":
		var cas struct {
			Expected int64
			Next     reference.DocumentState
		}
		if err := json.Unmarshal(args, &cas); err != nil {
			return nil, fmt.Errorf("%w: states.cas: %v", reference.ErrInvalidArgument, err)
		}
		ok, err := s.States.CompareAndSet(ctx, cas.Expected, cas.Next)
		return map[string]any{"swapped": ok}, err
	case "states.remove":
		ok, err := s.States.Remove(ctx, a.Space, a.DocumentID, a.Revision)
		return map[string]any{"removed": ok}, err
	case "states.recordVersion":
		return map[string]any{}, s.States.RecordVersion(ctx, a.State)
	case "states.versions":
		sts, err := s.States.Versions(ctx, a.Space, a.DocumentID)
		return map[string]any{"states": nonNil(sts)}, err
	case "states.list":
		sts, err := s.States.List(ctx, a.Space)
		return map[string]any{"states": nonNil(sts)}, err
	case "states.isReferenced":
		ok, err := s.States.IsReferencedByOtherDocument(ctx, a.Space, a.DocumentID, a.Edge)
		return map[string]any{"referenced": ok}, err
	case "registry.findMatches":
		es, err := s.Registry.FindMatches(ctx, a.Space, a.TypeKey, a.Names)
		return map[string]any{"entities": nonNil(es)}, err
	case "registry.saveAll":
		regs := make([]reference.EntityRegistration, 0, len(a.Registrations))
		for _, r := range a.Registrations {
			canon := reference.Normalize(r.CanonicalName)
			var aliases []string
			for _, n := range r.Names {
				if n != canon {
					aliases = append(aliases, n)
				}
			}
			regs = append(regs, reference.EntityRegistration{NodeID: r.NodeID, Type: r.Type, CanonicalName: r.CanonicalName, Aliases: aliases, Properties: r.Properties})
		}
		return map[string]any{}, s.Registry.SaveAll(ctx, a.Space, regs)
	case "registry.list":
		es, err := s.Registry.List(ctx, a.Space)
		return map[string]any{"entities": nonNil(es)}, err
	case "graph.apply":
		return map[string]any{}, s.Writer.Apply(ctx, a.Space, a.Mutation)
	case "graph.readRecords":
		r, err := s.Writer.ReadRecords(ctx, a.Space)
		return map[string]any{"nodes": nonNil(r.Nodes), "edges": nonNil(r.Edges)}, err
	case "locks.tryAcquire":
		l, ok, err := s.Locks.TryAcquire(ctx, a.Space, a.DocumentID, a.Holder, a.Now, a.TTLMillis)
		return map[string]any{"lease": l, "acquired": ok}, err
	case "locks.renew":
		l, err := s.Locks.Renew(ctx, a.Lease, a.Now, a.TTLMillis)
		return map[string]any{"lease": l}, err
	case "locks.release":
		return map[string]any{}, s.Locks.Release(ctx, a.Lease)
	case "checkpoints.load":
		cp, ok, err := s.Checkpoints.Load(ctx, a.ThreadID)
		if !ok {
			return map[string]any{"checkpoint": nil}, err
		}
		return map[string]any{"checkpoint": cp}, err
	case "checkpoints.put":
		return map[string]any{}, s.Checkpoints.Put(ctx, a.Checkpoint)
	case "plans.save":
		id, err := s.Plans.Save(ctx, a.Owner, a.OperationID, a.Question, a.Minutes)
		return map[string]any{"id": id}, err
	case "plans.list":
		rows, err := s.Plans.List(ctx, a.Owner)
		return map[string]any{"rows": nonNil(rows)}, err
	}
	return nil, &Error{Op: op, Code: "unsupported", Definite: true, Message: "unknown operation " + op}
}

// serveArgs holds the arguments of every operation (each uses some).
type serveArgs struct {
	Operation     reference.Operation     `json:"operation"`
	Plan          string                  `json:"plan"`
	OperationID   string                  `json:"operationId"`
	Limit         int                     `json:"limit"`
	Holder        string                  `json:"holder"`
	Now           int64                   `json:"now"`
	TTLMillis     int64                   `json:"ttlMillis"`
	Space         string                  `json:"space"`
	DocumentID    string                  `json:"documentId"`
	Revision      int64                   `json:"revision"`
	State         reference.DocumentState `json:"state"`
	Edge          reference.EdgeKey       `json:"edge"`
	TypeKey       string                  `json:"typeKey"`
	Names         []string                `json:"names"`
	Registrations []registration          `json:"registrations"`
	Mutation      reference.Mutation      `json:"mutation"`
	Lease         reference.Lease         `json:"lease"`
	ThreadID      string                  `json:"threadId"`
	Checkpoint    plansave.Checkpoint     `json:"checkpoint"`
	Owner         string                  `json:"owner"`
	Question      string                  `json:"question"`
	Minutes       int                     `json:"minutes"`
}

// serves reports whether s has the store an operation's prefix names.
func (s Served) serves(prefix string) bool {
	switch prefix {
	case "ops":
		return s.Ops != nil
	case "states":
		return s.States != nil
	case "registry":
		return s.Registry != nil
	case "graph":
		return s.Writer != nil
	case "locks":
		return s.Locks != nil
	case "checkpoints":
		return s.Checkpoints != nil
	case "plans":
		return s.Plans != nil
	}
	return false
}

// storeOf names the store of an operation prefix ("ops" → operations).
func storeOf(prefix string) string {
	if prefix == "ops" {
		return StoreOperations
	}
	return prefix
}

// StoreOfOp is the store (a hello name) an operation belongs to, or "".
func StoreOfOp(op string) string {
	prefix, _, ok := strings.Cut(op, ".")
	if !ok {
		return ""
	}
	s := storeOf(prefix)
	if !slices.Contains(knownStores, s) {
		return ""
	}
	return s
}

func stateResultOf(st reference.DocumentState, ok bool) map[string]any {
	if !ok {
		return map[string]any{"state": nil}
	}
	return map[string]any{"state": st}
}

// nonNil makes a nil list an empty one, so that it encodes as [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// WireError is an error as the protocol spells it (section 5).
type WireError struct {
	Code     string `json:"code"`
	Definite bool   `json:"definite"`
	Message  string `json:"message"`
}

// WireErrorOf spells a Go store's error as the protocol does: the code of
// the reference error it wraps, definite unless the outcome is unknown.
func WireErrorOf(err error) WireError {
	w := WireError{Definite: !reference.IsOutcomeUnknown(err), Message: err.Error()}
	var pe *Error
	switch {
	case errors.As(err, &pe):
		w.Code, w.Definite = pe.Code, pe.Definite
	case faults.IsInjected(err):
		w.Code = "injected"
		if !reference.IsRetryable(err) {
			w.Code = "permanent"
		}
	case errors.Is(err, reference.ErrNotFound):
		w.Code = "not_found"
	case errors.Is(err, reference.ErrTimeBackwards):
		w.Code = "time_backwards"
	case errors.Is(err, reference.ErrRegistryConflict):
		w.Code = "registry_conflict"
	case errors.Is(err, reference.ErrMissingEndpoint):
		w.Code = "missing_endpoint"
	case errors.Is(err, reference.ErrLeaseLost):
		w.Code = "lease_lost"
	case errors.Is(err, plansave.ErrConflict):
		w.Code = "plan_conflict"
	case errors.Is(err, reference.ErrInvalidArgument):
		w.Code = "invalid_argument"
	case !reference.IsRetryable(err):
		w.Code = "permanent"
	default:
		w.Code = "unavailable"
	}
	return w
}

// Err turns a wire error back into the Go error a Client returns for it
// (its Unwrap gives the reference error of the code); an injected one is
// the injected fault itself, as the service would have got it from a Go
// store.
func (w WireError) Err(op string) error {
	if w.Code == "injected" {
		return &faults.InjectedError{Point: faults.StoreCall, Retryable: true}
	}
	return &Error{Op: op, Code: w.Code, Definite: w.Definite, Message: w.Message}
}
