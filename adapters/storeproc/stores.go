package storeproc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

// Stores returns the System A stores the process declared (a field is nil
// for an interface it did not declare), closed by closing c.
func (c *Client) Stores() reference.Stores {
	var s reference.Stores
	if c.Has(StoreOperations) {
		s.Ops = &OperationStore{c}
	}
	if c.Has(StoreStates) {
		s.States = &StateStore{c}
	}
	if c.Has(StoreRegistry) {
		s.Registry = &Registry{c}
	}
	if c.Has(StoreGraph) {
		s.Writer = &Writer{c}
	}
	if c.Has(StoreLocks) {
		s.Locks = &Locks{c}
	}
	s.Closer = c
	return s
}

var (
	_ reference.OperationStore     = (*OperationStore)(nil)
	_ reference.DocumentStateStore = (*StateStore)(nil)
	_ reference.EntityRegistry     = (*Registry)(nil)
	_ reference.GraphWriter        = (*Writer)(nil)
	_ reference.LockProvider       = (*Locks)(nil)
)

// nonBlank refuses a blank name argument (what names it) before it is
// sent, as store-protocol.md section 4 promises every store.
func nonBlank(what, s string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("%w: %s is blank", reference.ErrInvalidArgument, what)
	}
	return nil
}

// req marks result types with the fields that must be present.
type req []string

func (r req) required() []string { return r }

// OperationStore is reference.OperationStore over the protocol (ops.*).
type OperationStore struct{ c caller }

// CreateIfAbsent implements reference.OperationStore (ops.create).
func (s *OperationStore) CreateIfAbsent(ctx context.Context, op reference.Operation, plan reference.Plan) (bool, error) {
	if err := s.c.argCheck(reference.CheckCreate(op, plan)); err != nil {
		return false, err
	}
	payload, err := s.c.encodePlan(plan)
	if err != nil {
		return false, err
	}
	var res struct {
		req
		Created bool `json:"created"`
	}
	res.req = req{"created"}
	err = s.c.call(ctx, "ops.create", map[string]any{"operation": op, "plan": string(payload)}, &res)
	return res.Created, err
}

// Get implements reference.OperationStore (ops.get).
func (s *OperationStore) Get(ctx context.Context, operationID string) (reference.Operation, error) {
	if reference.CheckOperationID(operationID) != nil {
		return reference.Operation{}, fmt.Errorf("operation %q: %w", operationID, reference.ErrNotFound)
	}
	var res struct {
		req
		Operation reference.Operation `json:"operation"`
	}
	res.req = req{"operation"}
	if err := s.c.call(ctx, "ops.get", map[string]any{"operationId": operationID}, &res); err != nil {
		return reference.Operation{}, err
	}
	return res.Operation, nil
}

// GetPlan implements reference.OperationStore (ops.getPlan): the stored
// payload is decoded and checked against the fingerprint here.
func (s *OperationStore) GetPlan(ctx context.Context, operationID string) (reference.Plan, error) {
	if reference.CheckOperationID(operationID) != nil {
		return reference.Plan{}, fmt.Errorf("operation %q: %w", operationID, reference.ErrNotFound)
	}
	var res struct {
		req
		Plan        string `json:"plan"`
		Fingerprint string `json:"fingerprint"`
	}
	res.req = req{"plan", "fingerprint"}
	if err := s.c.call(ctx, "ops.getPlan", map[string]any{"operationId": operationID}, &res); err != nil {
		return reference.Plan{}, err
	}
	return s.c.decodePlan(operationID, []byte(res.Plan), res.Fingerprint)
}

// CompareAndSet implements reference.OperationStore (ops.cas).
func (s *OperationStore) CompareAndSet(ctx context.Context, expected, next reference.Operation) (bool, error) {
	if err := s.c.argCheck(reference.ValidateUpdate(expected, next)); err != nil {
		return false, err
	}
	var res struct {
		req
		Swapped bool `json:"swapped"`
	}
	res.req = req{"swapped"}
	err := s.c.call(ctx, "ops.cas", map[string]any{"expected": expected, "next": next}, &res)
	return res.Swapped, err
}

// ListRecoverable implements reference.OperationStore (ops.listRecoverable).
func (s *OperationStore) ListRecoverable(ctx context.Context, limit int) ([]reference.Operation, error) {
	if err := s.c.argCheck(reference.CheckLimit(limit)); err != nil {
		return nil, err
	}
	return s.list(ctx, "ops.listRecoverable", map[string]any{"limit": limit})
}

// List implements reference.OperationStore (ops.list).
func (s *OperationStore) List(ctx context.Context) ([]reference.Operation, error) {
	return s.list(ctx, "ops.list", map[string]any{})
}

func (s *OperationStore) list(ctx context.Context, op string, args any) ([]reference.Operation, error) {
	var res struct {
		req
		Operations []reference.Operation `json:"operations"`
	}
	res.req = req{"operations"}
	if err := s.c.call(ctx, op, args, &res); err != nil {
		return nil, err
	}
	if res.Operations == nil {
		res.Operations = []reference.Operation{}
	}
	return res.Operations, nil
}

// Claim implements reference.OperationStore (ops.claim).
func (s *OperationStore) Claim(ctx context.Context, operationID, holder string, now, ttlMillis int64) (bool, error) {
	if err := s.c.argCheck(reference.CheckOperationID(operationID)); err != nil {
		return false, err
	}
	if err := s.c.argCheck(reference.CheckClaim(holder, ttlMillis)); err != nil {
		return false, err
	}
	var res struct {
		req
		Claimed bool `json:"claimed"`
	}
	res.req = req{"claimed"}
	err := s.c.call(ctx, "ops.claim", map[string]any{"operationId": operationID, "holder": holder, "now": now, "ttlMillis": ttlMillis}, &res)
	return res.Claimed, err
}

// ReleaseClaim implements reference.OperationStore (ops.releaseClaim).
func (s *OperationStore) ReleaseClaim(ctx context.Context, operationID, holder string) (bool, error) {
	if err := s.c.argCheck(reference.CheckOperationID(operationID)); err != nil {
		return false, err
	}
	if err := s.c.argCheck(nonBlank("holder", holder)); err != nil {
		return false, err
	}
	var res struct {
		req
		Released bool `json:"released"`
	}
	res.req = req{"released"}
	err := s.c.call(ctx, "ops.releaseClaim", map[string]any{"operationId": operationID, "holder": holder}, &res)
	return res.Released, err
}

// StateStore is reference.DocumentStateStore over the protocol (states.*).
type StateStore struct{ c caller }

type stateResult struct {
	req
	State *reference.DocumentState `json:"state"`
}

func (s *StateStore) find(ctx context.Context, op string, args map[string]any) (reference.DocumentState, bool, error) {
	res := stateResult{req: req{"state"}}
	if err := s.c.call(ctx, op, args, &res); err != nil || res.State == nil {
		return reference.DocumentState{}, false, err
	}
	return *res.State, true, nil
}

// FindCurrent implements reference.DocumentStateStore (states.findCurrent).
func (s *StateStore) FindCurrent(ctx context.Context, space, documentID string) (reference.DocumentState, bool, error) {
	if err := s.c.argCheck(reference.CheckKey(space, documentID)); err != nil {
		return reference.DocumentState{}, false, err
	}
	return s.find(ctx, "states.findCurrent", map[string]any{"space": space, "documentId": documentID})
}

// FindByOperationID implements reference.DocumentStateStore
// (states.findByOperationId).
func (s *StateStore) FindByOperationID(ctx context.Context, space, documentID, operationID string) (reference.DocumentState, bool, error) {
	if err := s.c.argCheck(reference.CheckKey(space, documentID)); err != nil {
		return reference.DocumentState{}, false, err
	}
	if err := s.c.argCheck(reference.CheckOperationID(operationID)); err != nil {
		return reference.DocumentState{}, false, err
	}
	return s.find(ctx, "states.findByOperationId", map[string]any{"space": space, "documentId": documentID, "operationId": operationID})
}

// CompareAndSet implements reference.DocumentStateStore (states.cas).
func (s *StateStore) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	if err := s.c.argCheck(reference.CheckStateCAS(expected, next)); err != nil {
		return false, err
	}
	var res struct {
		req
		Swapped bool `json:"swapped"`
	}
	res.req = req{"swapped"}
	err := s.c.call(ctx, "states.cas", map[string]any{"expected": expected, "next": next}, &res)
	return res.Swapped, err
}

// Remove implements reference.DocumentStateStore (states.remove).
func (s *StateStore) Remove(ctx context.Context, space, documentID string, revision int64) (bool, error) {
	if err := s.c.argCheck(reference.CheckKey(space, documentID)); err != nil {
		return false, err
	}
	var res struct {
		req
		Removed bool `json:"removed"`
	}
	res.req = req{"removed"}
	err := s.c.call(ctx, "states.remove", map[string]any{"space": space, "documentId": documentID, "revision": revision}, &res)
	return res.Removed, err
}

// RecordVersion implements reference.DocumentStateStore
// (states.recordVersion).
func (s *StateStore) RecordVersion(ctx context.Context, state reference.DocumentState) error {
	if err := s.c.argCheck(reference.CheckVersion(state)); err != nil {
		return err
	}
	return s.c.call(ctx, "states.recordVersion", map[string]any{"state": state}, nil)
}

func (s *StateStore) states(ctx context.Context, op string, args map[string]any) ([]reference.DocumentState, error) {
	var res struct {
		req
		States []reference.DocumentState `json:"states"`
	}
	res.req = req{"states"}
	if err := s.c.call(ctx, op, args, &res); err != nil {
		return nil, err
	}
	if res.States == nil {
		res.States = []reference.DocumentState{}
	}
	return res.States, nil
}

// Versions implements reference.DocumentStateStore (states.versions).
func (s *StateStore) Versions(ctx context.Context, space, documentID string) ([]reference.DocumentState, error) {
	if err := s.c.argCheck(reference.CheckKey(space, documentID)); err != nil {
		return nil, err
	}
	return s.states(ctx, "states.versions", map[string]any{"space": space, "documentId": documentID})
}

// List implements reference.DocumentStateStore (states.list).
func (s *StateStore) List(ctx context.Context, space string) ([]reference.DocumentState, error) {
	if err := s.c.argCheck(reference.CheckSpace(space)); err != nil {
		return nil, err
	}
	return s.states(ctx, "states.list", map[string]any{"space": space})
}

// IsReferencedByOtherDocument implements reference.DocumentStateStore
// (states.isReferenced).
func (s *StateStore) IsReferencedByOtherDocument(ctx context.Context, space, documentID string, edge reference.EdgeKey) (bool, error) {
	if err := s.c.argCheck(reference.CheckSpace(space)); err != nil {
		return false, err
	}
	var res struct {
		req
		Referenced bool `json:"referenced"`
	}
	res.req = req{"referenced"}
	err := s.c.call(ctx, "states.isReferenced", map[string]any{"space": space, "documentId": documentID, "edge": edge}, &res)
	return res.Referenced, err
}

// Registry is reference.EntityRegistry over the protocol (registry.*).
// Names are normalised here, so the store compares strings as they come.
type Registry struct{ c caller }

type entitiesResult struct {
	req
	Entities []reference.RegisteredEntity `json:"entities"`
}

func (g *Registry) entities(ctx context.Context, op string, args map[string]any) ([]reference.RegisteredEntity, error) {
	res := entitiesResult{req: req{"entities"}}
	if err := g.c.call(ctx, op, args, &res); err != nil {
		return nil, err
	}
	out := make([]reference.RegisteredEntity, 0, len(res.Entities))
	for _, e := range res.Entities {
		if len(e.Properties) == 0 {
			e.Properties = nil
		}
		out = append(out, e)
	}
	return out, nil
}

// FindMatches implements reference.EntityRegistry (registry.findMatches).
func (g *Registry) FindMatches(ctx context.Context, space, entityType string, names []string) ([]reference.RegisteredEntity, error) {
	if err := g.c.argCheck(reference.CheckSpace(space)); err != nil {
		return nil, err
	}
	norm := reference.NormalizeNames(names)
	if norm == nil {
		norm = []string{}
	}
	return g.entities(ctx, "registry.findMatches", map[string]any{"space": space, "typeKey": reference.Normalize(entityType), "names": norm})
}

// registration is a registration as the protocol sends it.
type registration struct {
	NodeID        string            `json:"nodeId"`
	Type          string            `json:"type"`
	TypeKey       string            `json:"typeKey"`
	CanonicalName string            `json:"canonicalName"`
	Names         []string          `json:"names"`
	Properties    map[string]string `json:"properties,omitempty"`
}

// SaveAll implements reference.EntityRegistry (registry.saveAll).
func (g *Registry) SaveAll(ctx context.Context, space string, regs []reference.EntityRegistration) error {
	if err := g.c.argCheck(reference.CheckSpace(space)); err != nil {
		return err
	}
	out := make([]registration, 0, len(regs))
	for _, r := range regs {
		if err := g.c.argCheck(reference.CheckRegistration(space, r)); err != nil {
			return err
		}
		out = append(out, registration{NodeID: r.NodeID, Type: strings.TrimSpace(r.Type), TypeKey: reference.Normalize(r.Type),
			CanonicalName: strings.TrimSpace(r.CanonicalName), Names: r.NormalizedNames(), Properties: r.Properties})
	}
	return g.c.call(ctx, "registry.saveAll", map[string]any{"space": space, "registrations": out}, nil)
}

// List implements reference.EntityRegistry (registry.list).
func (g *Registry) List(ctx context.Context, space string) ([]reference.RegisteredEntity, error) {
	if err := g.c.argCheck(reference.CheckSpace(space)); err != nil {
		return nil, err
	}
	return g.entities(ctx, "registry.list", map[string]any{"space": space})
}

// Writer is reference.GraphWriter over the protocol (graph.*).
type Writer struct{ c caller }

// Apply implements reference.GraphWriter (graph.apply).
func (w *Writer) Apply(ctx context.Context, space string, m reference.Mutation) error {
	if err := w.c.argCheck(reference.CheckMutation(space, m)); err != nil {
		return err
	}
	return w.c.call(ctx, "graph.apply", map[string]any{"space": space, "mutation": m}, nil)
}

// ReadGraph implements reference.GraphWriter: the fold of ReadRecords.
func (w *Writer) ReadGraph(ctx context.Context, space string) (reference.Graph, error) {
	r, err := w.ReadRecords(ctx, space)
	if err != nil {
		return reference.Graph{}, err
	}
	return r.Graph(), nil
}

// ReadRecords implements reference.GraphWriter (graph.readRecords).
func (w *Writer) ReadRecords(ctx context.Context, space string) (reference.GraphRecords, error) {
	if err := w.c.argCheck(reference.CheckSpace(space)); err != nil {
		return reference.GraphRecords{}, err
	}
	var res struct {
		req
		Nodes []reference.Node `json:"nodes"`
		Edges []reference.Edge `json:"edges"`
	}
	res.req = req{"nodes", "edges"}
	if err := w.c.call(ctx, "graph.readRecords", map[string]any{"space": space}, &res); err != nil {
		return reference.GraphRecords{}, err
	}
	for i := range res.Nodes {
		if res.Nodes[i].Properties == nil {
			res.Nodes[i].Properties = map[string]string{}
		}
	}
	for i := range res.Edges {
		if res.Edges[i].Properties == nil {
			res.Edges[i].Properties = map[string]string{}
		}
	}
	return reference.GraphRecords{Nodes: res.Nodes, Edges: res.Edges}, nil
}

// Locks is reference.LockProvider over the protocol (locks.*).
type Locks struct{ c caller }

// TryAcquire implements reference.LockProvider (locks.tryAcquire).
func (p *Locks) TryAcquire(ctx context.Context, space, documentID, holder string, now, ttlMillis int64) (reference.Lease, bool, error) {
	if err := p.c.argCheck(reference.CheckLease(space, documentID, holder, ttlMillis)); err != nil {
		return reference.Lease{}, false, err
	}
	var res struct {
		req
		Lease    reference.Lease `json:"lease"`
		Acquired bool            `json:"acquired"`
	}
	res.req = req{"lease", "acquired"}
	err := p.c.call(ctx, "locks.tryAcquire", map[string]any{"space": space, "documentId": documentID, "holder": holder, "now": now, "ttlMillis": ttlMillis}, &res)
	if err != nil {
		return reference.Lease{}, false, err
	}
	return res.Lease, res.Acquired, nil
}

// Renew implements reference.LockProvider (locks.renew).
func (p *Locks) Renew(ctx context.Context, l reference.Lease, now, ttlMillis int64) (reference.Lease, error) {
	if err := p.c.argCheck(reference.CheckLease(l.Space, l.DocumentID, l.Holder, ttlMillis)); err != nil {
		return reference.Lease{}, err
	}
	var res struct {
		req
		Lease reference.Lease `json:"lease"`
	}
	res.req = req{"lease"}
	if err := p.c.call(ctx, "locks.renew", map[string]any{"lease": l, "now": now, "ttlMillis": ttlMillis}, &res); err != nil {
		return reference.Lease{}, leaseErr(l, err)
	}
	return res.Lease, nil
}

// Release implements reference.LockProvider (locks.release).
func (p *Locks) Release(ctx context.Context, l reference.Lease) error {
	if err := p.c.argCheck(reference.CheckKey(l.Space, l.DocumentID)); err != nil {
		return err
	}
	if err := p.c.argCheck(nonBlank("lease holder", l.Holder)); err != nil {
		return err
	}
	return leaseErr(l, p.c.call(ctx, "locks.release", map[string]any{"lease": l}, nil))
}

// leaseErr names the lease in a lease_lost error.
func leaseErr(l reference.Lease, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Code == "lease_lost" {
		return fmt.Errorf("lease %s/%s holder %s token %d: %w", l.Space, l.DocumentID, l.Holder, l.Token, err)
	}
	return err
}
