// Package memory provides thread-safe in-memory implementations of the
// reference store interfaces. They keep nothing across a process exit, so
// they cannot pass crash certification; they serve as the executable model
// the conformance suites are written against, and (with
// Options.CreateInsteadOfMerge) as a deliberately broken graph writer.
package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/crashmatrix/crashmatrix/reference"
)

// Options configures the in-memory stores.
type Options struct {
	// CreateInsteadOfMerge makes the graph writer CREATE a new node or edge
	// on every upsert instead of MERGE-ing into the existing one: a mutant
	// that produces duplicates.
	CreateInsteadOfMerge bool
}

// DuplicateReporter is implemented by graph writers that can report node ids
// or edge keys stored more than once.
type DuplicateReporter interface {
	// Duplicates returns one human-readable entry per node id or edge key
	// stored more than once in space; empty when there are none.
	Duplicates(ctx context.Context, space string) ([]string, error)
}

// New returns a fresh, empty set of in-memory stores.
func New(opts Options) reference.Stores {
	return reference.Stores{
		Ops:      NewOperationStore(),
		States:   NewStateStore(),
		Registry: NewRegistry(),
		Writer:   NewWriter(opts),
		Locks:    NewLocks(),
	}
}

var (
	_ reference.OperationStore     = (*OperationStore)(nil)
	_ reference.DocumentStateStore = (*StateStore)(nil)
	_ reference.EntityRegistry     = (*Registry)(nil)
	_ reference.GraphWriter        = (*Writer)(nil)
	_ reference.LockProvider       = (*Locks)(nil)
	_ DuplicateReporter            = (*Writer)(nil)
)

func blank(s string) bool { return strings.TrimSpace(s) == "" }

func ctxErr(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	return ctx.Err()
}

// ---------------------------------------------------------------------------
// Operation store

type opRecord struct {
	op   reference.Operation
	plan []byte // reference.EncodePlan output; decoding gives a deep copy
}

// OperationStore is an in-memory reference.OperationStore.
type OperationStore struct {
	mu  sync.Mutex
	ops map[string]*opRecord
}

// NewOperationStore returns an empty operation store.
func NewOperationStore() *OperationStore {
	return &OperationStore{ops: map[string]*opRecord{}}
}

func notFound(id string) error { return fmt.Errorf("operation %s: %w", id, reference.ErrNotFound) }

// CheckCreate validates an operation + plan pair as CreateIfAbsent does:
// blank ids wrap ErrInvalidArgument, then reference.CheckNewOperation.
func CheckCreate(op reference.Operation, plan reference.Plan) error {
	var missing []string
	if blank(op.OperationID) {
		missing = append(missing, "operationId")
	}
	if blank(op.Space) {
		missing = append(missing, "space")
	}
	if blank(op.DocumentID) {
		missing = append(missing, "documentId")
	}
	err := reference.CheckNewOperation(op, plan)
	if len(missing) > 0 {
		if err != nil {
			return fmt.Errorf("%w: blank %s: %w", reference.ErrInvalidArgument, strings.Join(missing, ", "), err)
		}
		return fmt.Errorf("%w: blank %s", reference.ErrInvalidArgument, strings.Join(missing, ", "))
	}
	return err
}

// CreateIfAbsent implements reference.OperationStore.
func (s *OperationStore) CreateIfAbsent(ctx context.Context, op reference.Operation, plan reference.Plan) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if err := CheckCreate(op, plan); err != nil {
		return false, err
	}
	payload, err := reference.EncodePlan(plan)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ops[op.OperationID]; ok {
		return false, nil
	}
	s.ops[op.OperationID] = &opRecord{op: op, plan: payload}
	return true, nil
}

// Get implements reference.OperationStore.
func (s *OperationStore) Get(ctx context.Context, operationID string) (reference.Operation, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.Operation{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.ops[operationID]
	if !ok {
		return reference.Operation{}, notFound(operationID)
	}
	return r.op, nil
}

// GetPlan implements reference.OperationStore.
func (s *OperationStore) GetPlan(ctx context.Context, operationID string) (reference.Plan, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.Plan{}, err
	}
	s.mu.Lock()
	r, ok := s.ops[operationID]
	var payload []byte
	var fp string
	if ok {
		payload, fp = r.plan, r.op.PlanFingerprint
	}
	s.mu.Unlock()
	if !ok {
		return reference.Plan{}, notFound(operationID)
	}
	return DecodeStoredPlan(operationID, payload, fp)
}

// DecodeStoredPlan decodes the plan payload stored with an operation and
// checks it against the operation's fingerprint, as every store's GetPlan
// does: an empty payload is ErrNoPersistedPlan, and the operation id is
// named in every error.
func DecodeStoredPlan(operationID string, payload []byte, fp string) (reference.Plan, error) {
	if len(payload) == 0 {
		return reference.Plan{}, fmt.Errorf("operation %s: %w", operationID, reference.ErrNoPersistedPlan)
	}
	p, err := reference.DecodePlan(payload, fp)
	if err != nil {
		return reference.Plan{}, fmt.Errorf("operation %s: %w", operationID, err)
	}
	return p, nil
}

// CorruptPlan overwrites the stored plan payload of an operation (a test
// hook for the corruption checks). It returns ErrNotFound for an unknown id.
func (s *OperationStore) CorruptPlan(operationID string, payload []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.ops[operationID]
	if !ok {
		return notFound(operationID)
	}
	r.plan = slices.Clone(payload)
	return nil
}

// ByDocument groups states by document id, keeping their order.
func ByDocument(states []reference.DocumentState) map[string][]reference.DocumentState {
	out := map[string][]reference.DocumentState{}
	for _, v := range states {
		out[v.DocumentID] = append(out[v.DocumentID], v)
	}
	return out
}

// MatchesExpected reports whether the stored record is the one a
// compare-and-set expects: same identity, stage, attempts and disposition.
func MatchesExpected(stored, expected reference.Operation) bool {
	return stored.SameIdentity(expected) && stored.Stage == expected.Stage &&
		stored.Attempts == expected.Attempts && stored.Disposition == expected.Disposition
}

// ApplyMutable returns stored with next's mutable fields (Stage, UpdatedAt,
// FailureReason, Attempts, Disposition, SupersededBy).
func ApplyMutable(stored, next reference.Operation) reference.Operation {
	stored.Stage = next.Stage
	stored.UpdatedAt = next.UpdatedAt
	stored.FailureReason = next.FailureReason
	stored.Attempts = next.Attempts
	stored.Disposition = next.Disposition
	stored.SupersededBy = next.SupersededBy
	return stored
}

// CompareAndSet implements reference.OperationStore. An illegal expected ->
// next step is an error; a stored record that is not expected gives false
// (a lost race is not an error, even if next would be illegal after the
// record that won); otherwise next must be a legal successor of the stored
// record. An unknown operation is an error wrapping ErrNotFound.
func (s *OperationStore) CompareAndSet(ctx context.Context, expected, next reference.Operation) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if err := reference.ValidateUpdate(expected, next); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.ops[expected.OperationID]
	if !ok {
		return false, notFound(expected.OperationID)
	}
	if !MatchesExpected(r.op, expected) {
		return false, nil
	}
	if err := reference.ValidateUpdate(r.op, next); err != nil {
		return false, err
	}
	r.op = ApplyMutable(r.op, next)
	return true, nil
}

// ListRecoverable implements reference.OperationStore.
func (s *OperationStore) ListRecoverable(ctx context.Context, limit int) ([]reference.Operation, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d must be positive", reference.ErrInvalidArgument, limit)
	}
	s.mu.Lock()
	out := make([]reference.Operation, 0)
	for _, r := range s.ops {
		if r.op.Stage != reference.Completed && r.op.Disposition == reference.Active {
			out = append(out, r.op)
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].UpdatedAt != out[j].UpdatedAt {
			return out[i].UpdatedAt < out[j].UpdatedAt
		}
		return out[i].OperationID < out[j].OperationID
	})
	if len(out) > limit {
		out = out[:limit:limit]
	}
	return out, nil
}

// List implements reference.OperationStore.
func (s *OperationStore) List(ctx context.Context) ([]reference.Operation, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := make([]reference.Operation, 0, len(s.ops))
	for _, r := range s.ops {
		out = append(out, r.op)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].OperationID < out[j].OperationID })
	return out, nil
}

// ListSpace returns the operations of one space ordered by operationId
// (reference.SpaceLister).
func (s *OperationStore) ListSpace(ctx context.Context, space string) ([]reference.Operation, error) {
	all, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, op := range all {
		if op.Space == space {
			out = append(out, op)
		}
	}
	return out, nil
}

// CheckClaim validates claim arguments: a non-blank holder and a positive
// ttl.
func CheckClaim(holder string, ttlMillis int64) error {
	if blank(holder) {
		return fmt.Errorf("%w: holder is blank", reference.ErrInvalidArgument)
	}
	if ttlMillis <= 0 {
		return fmt.Errorf("%w: ttl %d must be positive", reference.ErrInvalidArgument, ttlMillis)
	}
	return nil
}

// Claim implements reference.OperationStore.
func (s *OperationStore) Claim(ctx context.Context, operationID, holder string, now, ttlMillis int64) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if err := CheckClaim(holder, ttlMillis); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.ops[operationID]
	if !ok {
		return false, notFound(operationID)
	}
	if r.op.ClaimHolder != "" && r.op.ClaimHolder != holder && r.op.ClaimExpiresAt > now {
		return false, nil
	}
	r.op.ClaimHolder, r.op.ClaimExpiresAt = holder, now+ttlMillis
	return true, nil
}

// ReleaseClaim implements reference.OperationStore.
func (s *OperationStore) ReleaseClaim(ctx context.Context, operationID, holder string) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.ops[operationID]
	if !ok {
		return false, notFound(operationID)
	}
	if blank(holder) || r.op.ClaimHolder != holder {
		return false, nil
	}
	r.op.ClaimHolder, r.op.ClaimExpiresAt = "", 0
	return true, nil
}

// ---------------------------------------------------------------------------
// Document state store

type docKey struct{ space, doc string }

// StateStore is an in-memory reference.DocumentStateStore.
type StateStore struct {
	mu       sync.Mutex
	current  map[docKey]reference.DocumentState
	versions map[docKey]map[int64]reference.DocumentState
}

// NewStateStore returns an empty document state store.
func NewStateStore() *StateStore {
	return &StateStore{current: map[docKey]reference.DocumentState{}, versions: map[docKey]map[int64]reference.DocumentState{}}
}

// CloneState returns a deep copy of a document state.
func CloneState(s reference.DocumentState) reference.DocumentState {
	s.FactSources = slices.Clone(s.FactSources)
	s.NodeIDs = slices.Clone(s.NodeIDs)
	return s
}

// FindCurrent implements reference.DocumentStateStore.
func (s *StateStore) FindCurrent(ctx context.Context, space, documentID string) (reference.DocumentState, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.DocumentState{}, false, err
	}
	if err := reference.CheckKey(space, documentID); err != nil {
		return reference.DocumentState{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.current[docKey{space, documentID}]
	if !ok {
		return reference.DocumentState{}, false, nil
	}
	return CloneState(st), true, nil
}

// FindByOperationID implements reference.DocumentStateStore: the current
// state first, then the highest recorded version committed by operationID.
func (s *StateStore) FindByOperationID(ctx context.Context, space, documentID, operationID string) (reference.DocumentState, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.DocumentState{}, false, err
	}
	if err := reference.CheckKey(space, documentID); err != nil {
		return reference.DocumentState{}, false, err
	}
	if blank(operationID) {
		return reference.DocumentState{}, false, fmt.Errorf("%w: operationId is blank", reference.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := docKey{space, documentID}
	if st, ok := s.current[k]; ok && st.OperationID == operationID {
		return CloneState(st), true, nil
	}
	var best reference.DocumentState
	found := false
	for rev, st := range s.versions[k] {
		if st.OperationID == operationID && (!found || rev > best.Revision) {
			best, found = st, true
		}
	}
	if !found {
		return reference.DocumentState{}, false, nil
	}
	return CloneState(best), true, nil
}

// CheckStateCAS validates the arguments of a document-state compare-and-set.
func CheckStateCAS(expected int64, next reference.DocumentState) error {
	if err := reference.CheckKey(next.Space, next.DocumentID); err != nil {
		return err
	}
	if expected < 0 {
		return fmt.Errorf("document %s/%s: %w: expected revision %d is negative", next.Space, next.DocumentID, reference.ErrInvalidRevision, expected)
	}
	if next.Revision != expected+1 {
		return fmt.Errorf("document %s/%s: %w: next revision %d is not %d+1", next.Space, next.DocumentID, reference.ErrInvalidRevision, next.Revision, expected)
	}
	return nil
}

// CompareAndSet implements reference.DocumentStateStore.
func (s *StateStore) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if err := CheckStateCAS(expected, next); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := docKey{next.Space, next.DocumentID}
	cur, ok := s.current[k]
	if expected == 0 {
		if ok {
			return false, nil
		}
	} else if !ok || cur.Revision != expected {
		return false, nil
	}
	s.current[k] = CloneState(next)
	return true, nil
}

// Remove implements reference.DocumentStateStore.
func (s *StateStore) Remove(ctx context.Context, space, documentID string, revision int64) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if err := reference.CheckKey(space, documentID); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := docKey{space, documentID}
	cur, ok := s.current[k]
	if !ok || cur.Revision != revision {
		return false, nil
	}
	delete(s.current, k)
	return true, nil
}

// RecordVersion implements reference.DocumentStateStore.
func (s *StateStore) RecordVersion(ctx context.Context, state reference.DocumentState) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if err := reference.CheckKey(state.Space, state.DocumentID); err != nil {
		return err
	}
	if state.Revision <= 0 {
		return fmt.Errorf("document %s/%s: %w: version revision %d must be positive", state.Space, state.DocumentID, reference.ErrInvalidRevision, state.Revision)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := docKey{state.Space, state.DocumentID}
	vs := s.versions[k]
	if vs == nil {
		vs = map[int64]reference.DocumentState{}
		s.versions[k] = vs
	}
	if _, ok := vs[state.Revision]; ok {
		return nil
	}
	vs[state.Revision] = CloneState(state)
	return nil
}

// Versions implements reference.DocumentStateStore.
func (s *StateStore) Versions(ctx context.Context, space, documentID string) ([]reference.DocumentState, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if err := reference.CheckKey(space, documentID); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := make([]reference.DocumentState, 0)
	for _, st := range s.versions[docKey{space, documentID}] {
		out = append(out, CloneState(st))
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Revision < out[j].Revision })
	return out, nil
}

// List implements reference.DocumentStateStore.
func (s *StateStore) List(ctx context.Context, space string) ([]reference.DocumentState, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if blank(space) {
		return nil, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	s.mu.Lock()
	out := make([]reference.DocumentState, 0)
	for k, st := range s.current {
		if k.space == space {
			out = append(out, CloneState(st))
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].DocumentID < out[j].DocumentID })
	return out, nil
}

// IsReferencedByOtherDocument implements reference.DocumentStateStore. An
// empty documentID excludes no document.
func (s *StateStore) IsReferencedByOtherDocument(ctx context.Context, space, documentID string, edge reference.EdgeKey) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	if blank(space) {
		return false, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, st := range s.current {
		if k.space != space || (documentID != "" && k.doc == documentID) {
			continue
		}
		if st.Status == reference.DocActive && st.Supports(edge) {
			return true, nil
		}
	}
	return false, nil
}

// ---------------------------------------------------------------------------
// Entity registry

type nameKey struct{ space, typ, name string }

type entityKey struct{ space, node string }

type entity struct {
	typ, canonical string
	names          map[string]bool
	props          map[string]string
}

// Registry is an in-memory reference.EntityRegistry.
type Registry struct {
	mu       sync.Mutex
	names    map[nameKey]string
	entities map[entityKey]*entity
}

// NewRegistry returns an empty entity registry.
func NewRegistry() *Registry {
	return &Registry{names: map[nameKey]string{}, entities: map[entityKey]*entity{}}
}

// NormalizedNames returns the distinct non-blank normalised names of a
// registration (canonical name and aliases), sorted.
func NormalizedNames(r reference.EntityRegistration) []string {
	set := map[string]bool{}
	for _, n := range r.Names() {
		if nn := reference.Normalize(n); nn != "" {
			set[nn] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// CheckRegistration rejects a registration with a blank node id, type or
// canonical name.
func CheckRegistration(space string, r reference.EntityRegistration) error {
	switch {
	case blank(space):
		return fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	case blank(r.NodeID):
		return fmt.Errorf("%w: registration nodeId is blank", reference.ErrInvalidArgument)
	case reference.Normalize(r.Type) == "":
		return fmt.Errorf("%w: registration %s: type is blank", reference.ErrInvalidArgument, r.NodeID)
	case reference.Normalize(r.CanonicalName) == "":
		return fmt.Errorf("%w: registration %s: canonical name is blank", reference.ErrInvalidArgument, r.NodeID)
	}
	return nil
}

// FindMatches implements reference.EntityRegistry. The result is ordered by
// NodeID.
func (g *Registry) FindMatches(ctx context.Context, space, entityType string, names []string) ([]reference.RegisteredEntity, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if blank(space) {
		return nil, fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	typ := reference.Normalize(entityType)
	g.mu.Lock()
	defer g.mu.Unlock()
	nodes := map[string]bool{}
	for _, n := range names {
		nn := reference.Normalize(n)
		if nn == "" {
			continue
		}
		if id, ok := g.names[nameKey{space, typ, nn}]; ok {
			nodes[id] = true
		}
	}
	out := make([]reference.RegisteredEntity, 0, len(nodes))
	for _, id := range slices.Sorted(maps.Keys(nodes)) {
		out = append(out, g.view(space, id))
	}
	return out, nil
}

func (g *Registry) view(space, id string) reference.RegisteredEntity {
	e := g.entities[entityKey{space, id}]
	re := reference.RegisteredEntity{Space: space, NodeID: id}
	if e == nil {
		return re
	}
	re.Type, re.CanonicalName = e.typ, e.canonical
	re.Names = slices.Sorted(maps.Keys(e.names))
	if len(e.props) > 0 {
		re.Properties = maps.Clone(e.props)
	}
	return re
}

// SaveAll implements reference.EntityRegistry.
func (g *Registry) SaveAll(ctx context.Context, space string, regs []reference.EntityRegistration) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if blank(space) {
		return fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	for _, r := range regs {
		if err := CheckRegistration(space, r); err != nil {
			return err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// Check everything first: all or nothing.
	batch := map[nameKey]string{}
	for _, r := range regs {
		typ := reference.Normalize(r.Type)
		for _, n := range NormalizedNames(r) {
			k := nameKey{space, typ, n}
			if id, ok := g.names[k]; ok && id != r.NodeID {
				return fmt.Errorf("name %q (type %s) is bound to %s, not %s: %w", n, typ, id, r.NodeID, reference.ErrRegistryConflict)
			}
			if id, ok := batch[k]; ok && id != r.NodeID {
				return fmt.Errorf("name %q (type %s) is bound to %s and %s in one batch: %w", n, typ, id, r.NodeID, reference.ErrRegistryConflict)
			}
			batch[k] = r.NodeID
		}
	}
	for _, r := range regs {
		typ := reference.Normalize(r.Type)
		ek := entityKey{space, r.NodeID}
		e := g.entities[ek]
		if e == nil {
			e = &entity{typ: strings.TrimSpace(r.Type), canonical: strings.TrimSpace(r.CanonicalName), names: map[string]bool{}, props: map[string]string{}}
			g.entities[ek] = e
		}
		for _, n := range NormalizedNames(r) {
			g.names[nameKey{space, typ, n}] = r.NodeID
			e.names[n] = true
		}
		maps.Copy(e.props, r.Properties)
	}
	return nil
}

// List implements reference.EntityRegistry.
func (g *Registry) List(ctx context.Context, space string) ([]reference.RegisteredEntity, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var ids []string
	for k := range g.entities {
		if k.space == space {
			ids = append(ids, k.node)
		}
	}
	sort.Strings(ids)
	out := make([]reference.RegisteredEntity, 0, len(ids))
	for _, id := range ids {
		out = append(out, g.view(space, id))
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// Graph writer

type nodeRow struct {
	id, label string
	props     map[string]string
}

type edgeRow struct {
	key   reference.EdgeKey
	props map[string]string
}

type graphSpace struct {
	nodes []nodeRow
	edges []edgeRow
}

func (g *graphSpace) clone() *graphSpace {
	c := &graphSpace{nodes: make([]nodeRow, len(g.nodes)), edges: make([]edgeRow, len(g.edges))}
	for i, n := range g.nodes {
		c.nodes[i] = nodeRow{n.id, n.label, maps.Clone(n.props)}
	}
	for i, e := range g.edges {
		c.edges[i] = edgeRow{e.key, maps.Clone(e.props)}
	}
	return c
}

// Writer is an in-memory reference.GraphWriter. Nodes and edges are kept as
// lists (not maps keyed by identity) so the CreateInsteadOfMerge mutant can
// store duplicates, which Duplicates reports.
type Writer struct {
	mu     sync.Mutex
	opts   Options
	spaces map[string]*graphSpace
}

// NewWriter returns an empty graph writer.
func NewWriter(opts Options) *Writer {
	return &Writer{opts: opts, spaces: map[string]*graphSpace{}}
}

// CheckMutation rejects blank node ids and edge endpoints or types.
func CheckMutation(space string, m reference.Mutation) error {
	if blank(space) {
		return fmt.Errorf("%w: space is blank", reference.ErrInvalidArgument)
	}
	for _, n := range m.UpsertNodes {
		if blank(n.ID) {
			return fmt.Errorf("%w: node upsert with blank id", reference.ErrInvalidArgument)
		}
	}
	for _, e := range m.UpsertEdges {
		if blank(e.Key.Source) || blank(e.Key.Target) || blank(e.Key.Type) {
			return fmt.Errorf("%w: edge upsert %s has a blank part", reference.ErrInvalidArgument, e.Key)
		}
	}
	return nil
}

// Apply implements reference.GraphWriter.
func (w *Writer) Apply(ctx context.Context, space string, m reference.Mutation) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if err := CheckMutation(space, m); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.spaces[space]
	if cur == nil {
		cur = &graphSpace{}
	}
	g := cur.clone() // work on a copy: all or nothing
	for _, id := range m.DeleteNodes {
		g.nodes = slices.DeleteFunc(g.nodes, func(n nodeRow) bool { return n.id == id })
		g.edges = slices.DeleteFunc(g.edges, func(e edgeRow) bool { return e.key.Source == id || e.key.Target == id })
	}
	for _, k := range m.DeleteEdges {
		g.edges = slices.DeleteFunc(g.edges, func(e edgeRow) bool { return e.key == k })
	}
	for _, n := range m.UpsertNodes {
		merged := false
		if !w.opts.CreateInsteadOfMerge {
			for i := range g.nodes {
				if g.nodes[i].id == n.ID {
					maps.Copy(g.nodes[i].props, n.Properties)
					merged = true
				}
			}
		}
		if !merged {
			props := maps.Clone(n.Properties)
			if props == nil {
				props = map[string]string{}
			}
			g.nodes = append(g.nodes, nodeRow{n.ID, n.Label, props})
		}
	}
	exists := map[string]bool{}
	for _, n := range g.nodes {
		exists[n.id] = true
	}
	for _, e := range m.UpsertEdges {
		if !exists[e.Key.Source] || !exists[e.Key.Target] {
			return fmt.Errorf("space %s: edge %s: %w", space, e.Key, reference.ErrMissingEndpoint)
		}
	}
	for _, e := range m.UpsertEdges {
		merged := false
		if !w.opts.CreateInsteadOfMerge {
			for i := range g.edges {
				if g.edges[i].key == e.Key {
					maps.Copy(g.edges[i].props, e.Properties)
					merged = true
				}
			}
		}
		if !merged {
			props := maps.Clone(e.Properties)
			if props == nil {
				props = map[string]string{}
			}
			g.edges = append(g.edges, edgeRow{e.Key, props})
		}
	}
	w.spaces[space] = g
	return nil
}

// ReadGraph implements reference.GraphWriter. Duplicates are folded, the
// last stored copy winning; Properties maps are never nil.
func (w *Writer) ReadGraph(ctx context.Context, space string) (reference.Graph, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.Graph{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := reference.NewGraph()
	g := w.spaces[space]
	if g == nil {
		return out, nil
	}
	for _, n := range g.nodes {
		props := maps.Clone(n.props)
		if props == nil {
			props = map[string]string{}
		}
		out.Nodes[n.id] = reference.Node{ID: n.id, Label: n.label, Properties: props}
	}
	for _, e := range g.edges {
		props := maps.Clone(e.props)
		if props == nil {
			props = map[string]string{}
		}
		out.Edges[e.key] = reference.Edge{Key: e.key, Properties: props}
	}
	return out, nil
}

// Duplicates implements DuplicateReporter: entries like "node person:abc x2"
// and "edge (a)-[KNOWS#0]->(b) x3", nodes first, each group sorted.
func (w *Writer) Duplicates(ctx context.Context, space string) ([]string, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.spaces[space]
	if g == nil {
		return nil, nil
	}
	nodes := map[string]int{}
	for _, n := range g.nodes {
		nodes[n.id]++
	}
	edges := map[reference.EdgeKey]int{}
	for _, e := range g.edges {
		edges[e.key]++
	}
	return FormatDuplicates(nodes, edges), nil
}

// FormatDuplicates renders per-identity counts as Duplicates entries,
// skipping identities stored once.
func FormatDuplicates(nodes map[string]int, edges map[reference.EdgeKey]int) []string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(nodes)) {
		if c := nodes[id]; c > 1 {
			out = append(out, fmt.Sprintf("node %s x%d", id, c))
		}
	}
	keys := slices.SortedFunc(maps.Keys(edges), func(a, b reference.EdgeKey) int {
		return strings.Compare(a.PortableID(), b.PortableID())
	})
	for _, k := range keys {
		if c := edges[k]; c > 1 {
			out = append(out, fmt.Sprintf("edge %s x%d", k, c))
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Lock provider

// Locks is an in-memory reference.LockProvider with fencing tokens that
// strictly increase per document, across releases.
type Locks struct {
	mu     sync.Mutex
	leases map[docKey]reference.Lease
	tokens map[docKey]int64
}

// NewLocks returns an empty lock provider.
func NewLocks() *Locks {
	return &Locks{leases: map[docKey]reference.Lease{}, tokens: map[docKey]int64{}}
}

// CheckLease validates lease arguments: non-blank space, document and
// holder, and a positive ttl.
func CheckLease(space, documentID, holder string, ttlMillis int64) error {
	if err := reference.CheckKey(space, documentID); err != nil {
		return err
	}
	return CheckClaim(holder, ttlMillis)
}

// LeaseLost returns an error wrapping reference.ErrLeaseLost that names
// the lease concerned.
func LeaseLost(l reference.Lease, why string) error {
	return fmt.Errorf("lease %s/%s holder %s token %d: %s: %w", l.Space, l.DocumentID, l.Holder, l.Token, why, reference.ErrLeaseLost)
}

// TryAcquire implements reference.LockProvider.
func (p *Locks) TryAcquire(ctx context.Context, space, documentID, holder string, now, ttlMillis int64) (reference.Lease, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.Lease{}, false, err
	}
	if err := CheckLease(space, documentID, holder, ttlMillis); err != nil {
		return reference.Lease{}, false, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := docKey{space, documentID}
	if cur, ok := p.leases[k]; ok && cur.ExpiresAt > now {
		if cur.Holder != holder {
			return cur, false, nil
		}
		cur.ExpiresAt = now + ttlMillis
		p.leases[k] = cur
		return cur, true, nil
	}
	p.tokens[k]++
	l := reference.Lease{Space: space, DocumentID: documentID, Holder: holder, Token: p.tokens[k], ExpiresAt: now + ttlMillis}
	p.leases[k] = l
	return l, true, nil
}

// Renew implements reference.LockProvider.
func (p *Locks) Renew(ctx context.Context, l reference.Lease, now, ttlMillis int64) (reference.Lease, error) {
	if err := ctxErr(ctx); err != nil {
		return reference.Lease{}, err
	}
	if err := CheckLease(l.Space, l.DocumentID, l.Holder, ttlMillis); err != nil {
		return reference.Lease{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := docKey{l.Space, l.DocumentID}
	cur, ok := p.leases[k]
	switch {
	case !ok:
		return reference.Lease{}, LeaseLost(l, "no lease is held")
	case cur.Holder != l.Holder || cur.Token != l.Token:
		return reference.Lease{}, LeaseLost(l, fmt.Sprintf("held by %s with token %d", cur.Holder, cur.Token))
	case cur.ExpiresAt <= now:
		return reference.Lease{}, LeaseLost(l, fmt.Sprintf("expired at %d (now %d)", cur.ExpiresAt, now))
	}
	cur.ExpiresAt = now + ttlMillis
	p.leases[k] = cur
	return cur, nil
}

// Release implements reference.LockProvider.
func (p *Locks) Release(ctx context.Context, l reference.Lease) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if err := reference.CheckKey(l.Space, l.DocumentID); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := docKey{l.Space, l.DocumentID}
	cur, ok := p.leases[k]
	if !ok {
		return LeaseLost(l, "no lease is held")
	}
	if cur.Holder != l.Holder || cur.Token != l.Token {
		return LeaseLost(l, fmt.Sprintf("held by %s with token %d", cur.Holder, cur.Token))
	}
	delete(p.leases, k)
	return nil
}
