package storeproc

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

// caller carries the stores' requests: a Client's pool of store
// processes, or a Caller (another transport).
type caller interface {
	call(ctx context.Context, op string, args, out any) error
	// check passes on an argument check's verdict, or drops it where the
	// calls only describe what already happened (Over with Lax).
	argCheck(err error) error
	encodePlan(p reference.Plan) ([]byte, error)
	decodePlan(operationID string, payload []byte, fingerprint string) (reference.Plan, error)
}

func (c *Client) argCheck(err error) error                    { return err }
func (c *Client) encodePlan(p reference.Plan) ([]byte, error) { return reference.EncodePlan(p) }
func (c *Client) decodePlan(id string, b []byte, fp string) (reference.Plan, error) {
	return reference.DecodeStoredPlan(id, b, fp)
}

// Caller sends one store protocol request (docs/store-protocol.md,
// section 4) over a transport of its own and returns its result object,
// or the error the other side replied with (an *Error for a protocol
// error code).
type Caller interface {
	Call(ctx context.Context, op string, args json.RawMessage) (json.RawMessage, error)
}

// Mode says how stores over a Caller treat the calls they carry.
type Mode int

const (
	// Strict checks every argument before sending it and every plan
	// against its fingerprint, as a Client does.
	Strict Mode = iota
	// Lax sends what it is given: the calls describe what a service
	// outside crashmatrix already did with its own stores, in its own
	// plan fingerprints (docs/service-protocol.md, sections 9 and 11), so
	// nothing is refused and a plan is decoded without recomputing its
	// fingerprint.
	Lax
)

// Over returns the stores named in stores (the hello names: operations,
// states, registry, graph, locks, checkpoints, plans) whose calls go
// through c; a field is nil for a store not named.
func Over(c Caller, mode Mode, stores []string) (reference.Stores, *Checkpoints, *Plans) {
	v := &via{c: c, mode: mode}
	has := func(s string) bool {
		for _, x := range stores {
			if x == s {
				return true
			}
		}
		return false
	}
	var st reference.Stores
	if has(StoreOperations) {
		st.Ops = &OperationStore{v}
	}
	if has(StoreStates) {
		st.States = &StateStore{v}
	}
	if has(StoreRegistry) {
		st.Registry = &Registry{v}
	}
	if has(StoreGraph) {
		st.Writer = &Writer{v}
	}
	if has(StoreLocks) {
		st.Locks = &Locks{v}
	}
	var cps *Checkpoints
	var plans *Plans
	if has(StoreCheckpoints) {
		cps = &Checkpoints{v}
	}
	if has(StorePlans) {
		plans = &Plans{v}
	}
	return st, cps, plans
}

// via is a caller over a Caller.
type via struct {
	c    Caller
	mode Mode
}

func (v *via) call(ctx context.Context, op string, args, out any) error {
	raw, err := json.Marshal(args)
	if err != nil {
		return err
	}
	res, err := v.c.Call(ctx, op, raw)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if len(res) == 0 {
		return errors.New(op + ": no result")
	}
	return decodeResult(res, out)
}

func (v *via) argCheck(err error) error {
	if v.mode == Lax {
		return nil
	}
	return err
}

func (v *via) encodePlan(p reference.Plan) ([]byte, error) {
	if v.mode == Lax {
		return json.Marshal(p)
	}
	return reference.EncodePlan(p)
}

func (v *via) decodePlan(id string, b []byte, fp string) (reference.Plan, error) {
	if v.mode == Lax {
		fp = "" // the service's own fingerprint: compared as a string, never recomputed
	}
	return reference.DecodeStoredPlan(id, b, fp)
}

// DecodeResult decodes a store protocol result object into out, as a
// Client does: a result type that lists required fields has them checked.
func DecodeResult(raw json.RawMessage, out any) error { return decodeResult(raw, out) }

var _ plansave.PlanStore = (*Plans)(nil)
