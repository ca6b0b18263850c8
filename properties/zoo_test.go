package properties

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/reference"
)

// The zoo: deliberately broken stores beyond mutants.go's first 24, one
// realistic bug each (atomicity, visibility, concurrency, space isolation,
// leases, writer idempotence, the optional methods), each asserted to be
// caught by the subtest named for it. The crash-level members (durability,
// leases under real kills, a CREATE-ing writer) are in zoo_crash_test.go.

// zooMember is one broken bundle and the subtests that must catch it.
type zooMember struct {
	name string
	// wrap breaks a fresh correct bundle.
	wrap func(reference.Stores) reference.Stores
	// catchers are subtest paths under Stores (e.g.
	// "OperationStore/PlanRoundTrip"); each must fail.
	catchers []string
}

func withOps(f func(reference.OperationStore) reference.OperationStore) func(reference.Stores) reference.Stores {
	return func(s reference.Stores) reference.Stores { s.Ops = f(s.Ops); return s }
}

func withStates(f func(reference.DocumentStateStore) reference.DocumentStateStore) func(reference.Stores) reference.Stores {
	return func(s reference.Stores) reference.Stores { s.States = f(s.States); return s }
}

func withRegistry(f func(reference.EntityRegistry) reference.EntityRegistry) func(reference.Stores) reference.Stores {
	return func(s reference.Stores) reference.Stores { s.Registry = f(s.Registry); return s }
}

func withWriter(f func(reference.GraphWriter) reference.GraphWriter) func(reference.Stores) reference.Stores {
	return func(s reference.Stores) reference.Stores { s.Writer = f(s.Writer); return s }
}

func withLocks(f func(reference.LockProvider) reference.LockProvider) func(reference.Stores) reference.Stores {
	return func(s reference.Stores) reference.Stores { s.Locks = f(s.Locks); return s }
}

// raceWindow is the pause a two-step write takes between its steps (a
// second statement, a network round trip): long enough for a concurrent
// reader to land in it.
const raceWindow = time.Millisecond

func zoo() []zooMember {
	return []zooMember{
		// --- OperationStore
		{"OpCreateNotAtomic", withOps(func(s reference.OperationStore) reference.OperationStore { return newPlanLater(s) }),
			[]string{"Concurrency/" + subLinOperations}},
		{"OpGetServesStaleCache", withOps(func(s reference.OperationStore) reference.OperationStore { return &staleGet{OperationStore: s} }),
			[]string{"OperationStore/" + subOpStageWalk, "Concurrency/" + subLinOperations}},
		{"OpCASDropsFailureReason", withOps(func(s reference.OperationStore) reference.OperationStore { return &dropReason{s} }),
			[]string{"OperationStore/" + subOpStageWalk}},
		{"OpListRecoverableByIDOnly", withOps(func(s reference.OperationStore) reference.OperationStore { return &listByID{s} }),
			[]string{"OperationStore/" + subOpListRecoverable}},
		{"OpClaimIgnoresLiveClaim", withOps(func(s reference.OperationStore) reference.OperationStore { return &claimAlways{s} }),
			[]string{"OperationStore/" + subOpClaimLifecycle, "OperationStore/" + subOpClaimConcurrent}},
		{"OpCASDropsClaim", withOps(func(s reference.OperationStore) reference.OperationStore { return &casDropsClaim{s} }),
			[]string{"OperationStore/" + subOpCASKeepsClaim}},
		{"OpSpacePlansDropsOne", withOps(func(s reference.OperationStore) reference.OperationStore { return &spacePlansDropOne{s} }),
			[]string{"OptionalMethods"}},
		{"OpListSpaceLeaksOtherSpaces", withOps(func(s reference.OperationStore) reference.OperationStore { return &listSpaceAll{s} }),
			[]string{"OptionalMethods"}},
		{"OpCreateSkipsValidation", withOps(func(s reference.OperationStore) reference.OperationStore { return newNoValidate(s) }),
			[]string{"OperationStore/" + subOpCreateRejectsInvalid}},
		// --- DocumentStateStore
		{"StateCASTwoStep", withStates(func(s reference.DocumentStateStore) reference.DocumentStateStore { return newTwoStepState(s) }),
			[]string{"Concurrency/" + subLinStates}},
		{"StateFindByOperationCurrentOnly", withStates(func(s reference.DocumentStateStore) reference.DocumentStateStore { return &byOpCurrentOnly{s} }),
			[]string{"DocumentStateStore/" + subStateFindByOperationID}},
		{"StateRecordVersionNotIdempotent", withStates(func(s reference.DocumentStateStore) reference.DocumentStateStore { return newAppendVersions(s) }),
			[]string{"DocumentStateStore/" + subStateVersions}},
		{"StateVersionsDescending", withStates(func(s reference.DocumentStateStore) reference.DocumentStateStore { return &versionsDesc{s} }),
			[]string{"DocumentStateStore/" + subStateVersions}},
		{"StateIgnoresSpace", withStates(func(s reference.DocumentStateStore) reference.DocumentStateStore { return &stateOneSpace{s} }),
			[]string{"DocumentStateStore/" + subStateSpaceIsolation}},
		{"StateReferencesCountOwnDocument", withStates(func(s reference.DocumentStateStore) reference.DocumentStateStore { return &refsSelf{s} }),
			[]string{"DocumentStateStore/" + subStateFactSources}},
		{"StateSpaceVersionsMissesLast", withStates(func(s reference.DocumentStateStore) reference.DocumentStateStore { return &spaceVersionsShort{s} }),
			[]string{"OptionalMethods"}},
		// --- EntityRegistry
		{"RegistrySaveAgainConflicts", withRegistry(func(r reference.EntityRegistry) reference.EntityRegistry { return newSaveOnce(r) }),
			[]string{"EntityRegistry/" + subRegSaveAgainNoOp}},
		{"RegistryAliasesReplaced", withRegistry(func(r reference.EntityRegistry) reference.EntityRegistry { return &aliasesReplaced{r} }),
			[]string{"EntityRegistry/" + subRegAliasesMerged}},
		{"RegistryIgnoresSpace", withRegistry(func(r reference.EntityRegistry) reference.EntityRegistry { return &registryOneSpace{r} }),
			[]string{"EntityRegistry/" + subRegSpaceIsolation}},
		{"RegistryBatchMatcherDropsLast", withRegistry(func(r reference.EntityRegistry) reference.EntityRegistry { return &batchDropsLast{r} }),
			[]string{"OptionalMethods", "EntityRegistry/" + subRegModel}},
		{"RegistryBatchConflictAccepted", withRegistry(func(r reference.EntityRegistry) reference.EntityRegistry { return &firstBindingWins{r} }),
			[]string{"EntityRegistry/" + subRegConflictInBatch}},
		// --- GraphWriter
		{"WriterReplayAppendsProperties", withWriter(func(w reference.GraphWriter) reference.GraphWriter { return newAppendProps(w) }),
			[]string{"GraphWriter/" + subWriterApplyTwice}},
		{"WriterVisibleHalfway", withWriter(func(w reference.GraphWriter) reference.GraphWriter { return &halfwayVisible{w} }),
			[]string{"Concurrency/" + subLinGraph}},
		{"WriterIgnoresSpace", withWriter(func(w reference.GraphWriter) reference.GraphWriter { return &writerOneSpace{w} }),
			[]string{"GraphWriter/" + subWriterSpaceIsolation}},
		{"WriterDeleteAbsentFails", withWriter(func(w reference.GraphWriter) reference.GraphWriter { return &deleteAbsentFails{w} }),
			[]string{"GraphWriter/" + subWriterDeleteAbsent}},
		{"WriterEdgeKeyWithoutRank", withWriter(func(w reference.GraphWriter) reference.GraphWriter { return &rankless{w} }),
			[]string{"GraphWriter/" + subWriterModel}},
		{"WriterReadGraphAliasesStore", withWriter(func(w reference.GraphWriter) reference.GraphWriter { return newAliasingReader(w) }),
			[]string{"GraphWriter/" + subWriterReadGraphDetached}},
		// --- LockProvider
		{"LockNeverExpires", withLocks(func(p reference.LockProvider) reference.LockProvider { return &neverExpires{p} }),
			[]string{"LockProvider/" + subLockExpiry, "Concurrency/" + subLinLeases}},
		{"LockReacquireNewToken", withLocks(func(p reference.LockProvider) reference.LockProvider { return &reacquireNewToken{p} }),
			[]string{"LockProvider/" + subLockReacquire}},
		{"LockIgnoresSpace", withLocks(func(p reference.LockProvider) reference.LockProvider { return &lockOneSpace{p} }),
			[]string{"LockProvider/" + subLockScopes}},
		{"LockSecondReleaseSucceeds", withLocks(func(p reference.LockProvider) reference.LockProvider { return &releaseTwice{LockProvider: p} }),
			[]string{"LockProvider/" + subLockRelease}},
		{"LockAcceptsBlankHolder", withLocks(func(p reference.LockProvider) reference.LockProvider { return &blankHolder{p} }),
			[]string{"LockProvider/" + subLockBlankIDs}},
		{"LockExpiryInclusive", withLocks(func(p reference.LockProvider) reference.LockProvider { return &expiryInclusive{p} }),
			[]string{"LockProvider/" + subLockExpiry, "Concurrency/" + subLinLeases}},
	}
}

// TestZooIsCaught runs the whole Stores suite on each broken store through
// StoresFailures, the negative control a store author has, and asserts
// that each of its catchers failed.
func TestZooIsCaught(t *testing.T) {
	members := zoo()
	if len(members) < 30 {
		t.Fatalf("the zoo has %d members; it must keep at least 30", len(members))
	}
	for _, m := range members {
		t.Run(m.name, func(t *testing.T) {
			start := time.Now()
			failed := StoresFailures(func(string, string) (reference.Stores, error) { return m.wrap(memory.New(memory.Options{})), nil })
			if len(failed) == 0 {
				t.Fatalf("the suite passed for broken store %s; it must fail in %v", m.name, m.catchers)
			}
			var failedIn []string
			for p := range failed {
				if !strings.Contains(p, "/") {
					failedIn = append(failedIn, p)
				}
			}
			slices.Sort(failedIn)
			for _, c := range m.catchers {
				if _, ok := failed[c]; !ok {
					t.Errorf("broken store %s was not caught by %s; it failed only in %v", m.name, c, failedIn)
				}
			}
			if msg, ok := failed[m.catchers[0]]; ok {
				t.Logf("caught in %v by %v; first message: %s", time.Since(start).Round(time.Millisecond), failedIn, trim(msg))
			}
		})
	}
}

// ---------------------------------------------------------------------------
// OperationStore members

// planLater writes the operation, then (a statement later) its plan: a
// reader in between sees an operation without its plan.
type planLater struct {
	reference.OperationStore
	mu    sync.Mutex
	ready map[string]bool
}

func newPlanLater(s reference.OperationStore) *planLater {
	return &planLater{OperationStore: s, ready: map[string]bool{}}
}

func (s *planLater) CreateIfAbsent(ctx context.Context, op reference.Operation, p reference.Plan) (bool, error) {
	ok, err := s.OperationStore.CreateIfAbsent(ctx, op, p)
	if ok {
		time.Sleep(raceWindow)
		s.mu.Lock()
		s.ready[op.OperationID] = true
		s.mu.Unlock()
	}
	return ok, err
}

func (s *planLater) GetPlan(ctx context.Context, id string) (reference.Plan, error) {
	s.mu.Lock()
	ok := s.ready[id]
	s.mu.Unlock()
	if !ok {
		return reference.Plan{}, fmt.Errorf("plan of %s: %w", id, reference.ErrNotFound)
	}
	return s.OperationStore.GetPlan(ctx, id)
}

// staleGet answers Get from a cache filled on the first read and never
// invalidated.
type staleGet struct {
	reference.OperationStore
	cache sync.Map
}

func (s *staleGet) Get(ctx context.Context, id string) (reference.Operation, error) {
	if v, ok := s.cache.Load(id); ok {
		return v.(reference.Operation), nil
	}
	op, err := s.OperationStore.Get(ctx, id)
	if err == nil {
		s.cache.Store(id, op)
	}
	return op, err
}

// dropReason forgets the failure reason on every stage change.
type dropReason struct{ reference.OperationStore }

func (s *dropReason) CompareAndSet(ctx context.Context, expected, next reference.Operation) (bool, error) {
	next.FailureReason = ""
	return s.OperationStore.CompareAndSet(ctx, expected, next)
}

// listByID scans unfinished operations by id instead of by update time.
type listByID struct{ reference.OperationStore }

func (s *listByID) ListRecoverable(ctx context.Context, limit int) ([]reference.Operation, error) {
	all, err := s.OperationStore.ListRecoverable(ctx, 1<<20)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b reference.Operation) int { return strings.Compare(a.OperationID, b.OperationID) })
	return all[:min(limit, len(all))], nil
}

// claimAlways hands the claim to whoever asks.
type claimAlways struct{ reference.OperationStore }

func (s *claimAlways) Claim(ctx context.Context, id, holder string, now, ttl int64) (bool, error) {
	if _, err := s.OperationStore.Get(ctx, id); err != nil {
		return false, err
	}
	_, _ = s.OperationStore.Claim(ctx, id, holder, now, ttl)
	return true, nil
}

// casDropsClaim writes the whole record on a stage change, losing the
// claim columns.
type casDropsClaim struct{ reference.OperationStore }

func (s *casDropsClaim) CompareAndSet(ctx context.Context, expected, next reference.Operation) (bool, error) {
	ok, err := s.OperationStore.CompareAndSet(ctx, expected, next)
	if ok && err == nil {
		if cur, gerr := s.OperationStore.Get(ctx, next.OperationID); gerr == nil && cur.ClaimHolder != "" {
			_, _ = s.OperationStore.ReleaseClaim(ctx, next.OperationID, cur.ClaimHolder)
		}
	}
	return ok, err
}

// spacePlansDropOne offers the batch plan read, one plan short.
type spacePlansDropOne struct{ reference.OperationStore }

func (s *spacePlansDropOne) SpacePlans(ctx context.Context, space string) (map[string]reference.Plan, map[string]error, error) {
	ops, err := s.OperationStore.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	plans := map[string]reference.Plan{}
	for i, op := range ops {
		if op.Space != space || i == len(ops)-1 {
			continue
		}
		p, err := s.OperationStore.GetPlan(ctx, op.OperationID)
		if err != nil {
			return nil, nil, err
		}
		plans[op.OperationID] = p
	}
	return plans, map[string]error{}, nil
}

// listSpaceAll offers ListSpace but forgets the space filter.
type listSpaceAll struct{ reference.OperationStore }

func (s *listSpaceAll) ListSpace(ctx context.Context, _ string) ([]reference.Operation, error) {
	return s.OperationStore.List(ctx)
}

// noValidate stores any pair, checked or not (its own map, first write
// wins).
type noValidate struct {
	reference.OperationStore
	mu    sync.Mutex
	extra map[string]reference.Operation
}

func newNoValidate(s reference.OperationStore) *noValidate {
	return &noValidate{OperationStore: s, extra: map[string]reference.Operation{}}
}

func (s *noValidate) CreateIfAbsent(ctx context.Context, op reference.Operation, p reference.Plan) (bool, error) {
	ok, err := s.OperationStore.CreateIfAbsent(ctx, op, p)
	if err == nil || op.OperationID == "" {
		return ok, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.extra[op.OperationID]; dup {
		return false, nil
	}
	s.extra[op.OperationID] = op
	return true, nil
}

func (s *noValidate) Get(ctx context.Context, id string) (reference.Operation, error) {
	s.mu.Lock()
	op, ok := s.extra[id]
	s.mu.Unlock()
	if ok {
		return op, nil
	}
	return s.OperationStore.Get(ctx, id)
}

// ---------------------------------------------------------------------------
// DocumentStateStore members

// twoStepState commits the new revision first and its content a statement
// later: a reader in between sees the new revision with the old content.
type twoStepState struct {
	reference.DocumentStateStore
	mu      sync.Mutex
	pending map[string]reference.DocumentState // doc -> state whose revision is visible before its content
}

func newTwoStepState(s reference.DocumentStateStore) *twoStepState {
	return &twoStepState{DocumentStateStore: s, pending: map[string]reference.DocumentState{}}
}

func (s *twoStepState) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	cur, had, err := s.DocumentStateStore.FindCurrent(ctx, next.Space, next.DocumentID)
	if err != nil {
		return false, err
	}
	ok, err := s.DocumentStateStore.CompareAndSet(ctx, expected, next)
	if !ok || err != nil || !had {
		return ok, err
	}
	half := next
	half.OperationID, half.ContentHash = cur.OperationID, cur.ContentHash
	s.mu.Lock()
	s.pending[next.Space+"\x00"+next.DocumentID] = half
	s.mu.Unlock()
	time.Sleep(raceWindow)
	s.mu.Lock()
	delete(s.pending, next.Space+"\x00"+next.DocumentID)
	s.mu.Unlock()
	return true, nil
}

func (s *twoStepState) FindCurrent(ctx context.Context, space, doc string) (reference.DocumentState, bool, error) {
	s.mu.Lock()
	half, ok := s.pending[space+"\x00"+doc]
	s.mu.Unlock()
	if ok {
		return half, true, nil
	}
	return s.DocumentStateStore.FindCurrent(ctx, space, doc)
}

// byOpCurrentOnly finds a state by operationId only if it is current.
type byOpCurrentOnly struct{ reference.DocumentStateStore }

func (s *byOpCurrentOnly) FindByOperationID(ctx context.Context, space, doc, op string) (reference.DocumentState, bool, error) {
	cur, ok, err := s.FindCurrent(ctx, space, doc)
	if err != nil || !ok || cur.OperationID != op {
		return reference.DocumentState{}, false, err
	}
	return cur, true, nil
}

// appendVersions records a version again on every call (no unique key on
// the revision).
type appendVersions struct {
	reference.DocumentStateStore
	mu    sync.Mutex
	again map[string][]reference.DocumentState
}

func newAppendVersions(s reference.DocumentStateStore) *appendVersions {
	return &appendVersions{DocumentStateStore: s, again: map[string][]reference.DocumentState{}}
}

func (s *appendVersions) RecordVersion(ctx context.Context, st reference.DocumentState) error {
	vs, err := s.DocumentStateStore.Versions(ctx, st.Space, st.DocumentID)
	if err != nil {
		return err
	}
	for _, v := range vs {
		if v.Revision == st.Revision {
			s.mu.Lock()
			k := st.Space + "\x00" + st.DocumentID
			s.again[k] = append(s.again[k], st)
			s.mu.Unlock()
			return nil
		}
	}
	return s.DocumentStateStore.RecordVersion(ctx, st)
}

func (s *appendVersions) Versions(ctx context.Context, space, doc string) ([]reference.DocumentState, error) {
	vs, err := s.DocumentStateStore.Versions(ctx, space, doc)
	s.mu.Lock()
	vs = append(vs, s.again[space+"\x00"+doc]...)
	s.mu.Unlock()
	slices.SortStableFunc(vs, func(a, b reference.DocumentState) int { return int(a.Revision - b.Revision) })
	return vs, err
}

// versionsDesc returns the history newest first.
type versionsDesc struct{ reference.DocumentStateStore }

func (s *versionsDesc) Versions(ctx context.Context, space, doc string) ([]reference.DocumentState, error) {
	vs, err := s.DocumentStateStore.Versions(ctx, space, doc)
	slices.Reverse(vs)
	return vs, err
}

// stateOneSpace keys documents by documentId alone.
type stateOneSpace struct{ reference.DocumentStateStore }

const oneSpace = "the-only-space"

func (s *stateOneSpace) put(st reference.DocumentState) reference.DocumentState {
	st.Space = oneSpace
	return st
}

func (s *stateOneSpace) back(space string, st reference.DocumentState) reference.DocumentState {
	st.Space = space
	return st
}

func (s *stateOneSpace) FindCurrent(ctx context.Context, space, doc string) (reference.DocumentState, bool, error) {
	st, ok, err := s.DocumentStateStore.FindCurrent(ctx, oneSpace, doc)
	return s.back(space, st), ok, err
}

func (s *stateOneSpace) FindByOperationID(ctx context.Context, space, doc, op string) (reference.DocumentState, bool, error) {
	st, ok, err := s.DocumentStateStore.FindByOperationID(ctx, oneSpace, doc, op)
	return s.back(space, st), ok, err
}

func (s *stateOneSpace) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	if next.Space == "" {
		return s.DocumentStateStore.CompareAndSet(ctx, expected, next)
	}
	return s.DocumentStateStore.CompareAndSet(ctx, expected, s.put(next))
}

// refsSelf counts the asking document's own support too.
type refsSelf struct{ reference.DocumentStateStore }

func (s *refsSelf) IsReferencedByOtherDocument(ctx context.Context, space, doc string, e reference.EdgeKey) (bool, error) {
	if cur, ok, err := s.FindCurrent(ctx, space, doc); err == nil && ok && slices.Contains(cur.FactSources, e) {
		return true, nil
	}
	return s.DocumentStateStore.IsReferencedByOtherDocument(ctx, space, doc, e)
}

// spaceVersionsShort offers the batch version read, each history without
// its last entry.
type spaceVersionsShort struct{ reference.DocumentStateStore }

func (s *spaceVersionsShort) SpaceVersions(ctx context.Context, space string) (map[string][]reference.DocumentState, error) {
	cur, err := s.List(ctx, space)
	if err != nil {
		return nil, err
	}
	out := map[string][]reference.DocumentState{}
	for _, c := range cur {
		vs, err := s.Versions(ctx, space, c.DocumentID)
		if err != nil {
			return nil, err
		}
		if len(vs) > 0 {
			vs = vs[:len(vs)-1]
		}
		out[c.DocumentID] = vs
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// EntityRegistry members

// saveOnce treats a registration it has seen as a conflict.
type saveOnce struct {
	reference.EntityRegistry
	mu   sync.Mutex
	seen map[string]bool
}

func newSaveOnce(r reference.EntityRegistry) *saveOnce {
	return &saveOnce{EntityRegistry: r, seen: map[string]bool{}}
}

func (r *saveOnce) SaveAll(ctx context.Context, space string, regs []reference.EntityRegistration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range regs {
		if r.seen[space+"\x00"+g.NodeID+"\x00"+g.CanonicalName] {
			return fmt.Errorf("%s already saved: %w", g.CanonicalName, reference.ErrRegistryConflict)
		}
	}
	if err := r.EntityRegistry.SaveAll(ctx, space, regs); err != nil {
		return err
	}
	for _, g := range regs {
		r.seen[space+"\x00"+g.NodeID+"\x00"+g.CanonicalName] = true
	}
	return nil
}

// aliasesReplaced drops the aliases saved before for the node.
type aliasesReplaced struct{ reference.EntityRegistry }

func (r *aliasesReplaced) FindMatches(ctx context.Context, space, typ string, names []string) ([]reference.RegisteredEntity, error) {
	hits, err := r.EntityRegistry.FindMatches(ctx, space, typ, names)
	for i := range hits {
		if len(hits[i].Names) > 2 {
			hits[i].Names = hits[i].Names[len(hits[i].Names)-2:]
		}
	}
	return hits, err
}

func (r *aliasesReplaced) List(ctx context.Context, space string) ([]reference.RegisteredEntity, error) {
	ents, err := r.EntityRegistry.List(ctx, space)
	for i := range ents {
		if len(ents[i].Names) > 2 {
			ents[i].Names = ents[i].Names[len(ents[i].Names)-2:]
		}
	}
	return ents, err
}

// registryOneSpace keys names without their space.
type registryOneSpace struct{ reference.EntityRegistry }

func (r *registryOneSpace) SaveAll(ctx context.Context, _ string, regs []reference.EntityRegistration) error {
	return r.EntityRegistry.SaveAll(ctx, oneSpace, regs)
}

func (r *registryOneSpace) FindMatches(ctx context.Context, space, typ string, names []string) ([]reference.RegisteredEntity, error) {
	hits, err := r.EntityRegistry.FindMatches(ctx, oneSpace, typ, names)
	for i := range hits {
		hits[i].Space = space
	}
	return hits, err
}

func (r *registryOneSpace) List(ctx context.Context, space string) ([]reference.RegisteredEntity, error) {
	ents, err := r.EntityRegistry.List(ctx, oneSpace)
	for i := range ents {
		ents[i].Space = space
	}
	return ents, err
}

// batchDropsLast offers the batch look-up, the last query unanswered.
type batchDropsLast struct{ reference.EntityRegistry }

func (r *batchDropsLast) MatchNodeIDs(ctx context.Context, space string, qs []reference.EntityQuery) ([][]string, error) {
	out, err := reference.MatchNodeIDs(ctx, r.EntityRegistry, space, qs)
	if err == nil && len(out) > 0 {
		out[len(out)-1] = []string{}
	}
	return out, err
}

// firstBindingWins accepts a batch that binds one name to two nodes,
// keeping the first binding.
type firstBindingWins struct{ reference.EntityRegistry }

func (r *firstBindingWins) SaveAll(ctx context.Context, space string, regs []reference.EntityRegistration) error {
	bound := map[string]string{}
	var keep []reference.EntityRegistration
	for _, g := range regs {
		k := strings.ToLower(g.Type + "\x00" + strings.TrimSpace(g.CanonicalName))
		if n, ok := bound[k]; ok && n != g.NodeID {
			continue
		}
		bound[k] = g.NodeID
		keep = append(keep, g)
	}
	return r.EntityRegistry.SaveAll(ctx, space, keep)
}

// ---------------------------------------------------------------------------
// GraphWriter members

// appendProps concatenates property values on a replay instead of setting
// them (SET n.p = n.p + $p).
type appendProps struct{ reference.GraphWriter }

func newAppendProps(w reference.GraphWriter) *appendProps { return &appendProps{w} }

func (w *appendProps) Apply(ctx context.Context, space string, m reference.Mutation) error {
	g, err := w.GraphWriter.ReadGraph(ctx, space)
	if err != nil {
		return err
	}
	m = m.Clone()
	for i, n := range m.UpsertNodes {
		if old, ok := g.Nodes[n.ID]; ok {
			props := map[string]string{}
			for k, v := range n.Properties {
				props[k] = old.Properties[k] + v
			}
			m.UpsertNodes[i].Properties = props
		}
	}
	return w.GraphWriter.Apply(ctx, space, m)
}

// halfwayVisible writes a mutation's nodes, then (a round trip later) its
// edges: readers in between see half of it.
type halfwayVisible struct{ reference.GraphWriter }

func (w *halfwayVisible) Apply(ctx context.Context, space string, m reference.Mutation) error {
	first := reference.Mutation{OperationID: m.OperationID, DeleteNodes: m.DeleteNodes, DeleteEdges: m.DeleteEdges, UpsertNodes: m.UpsertNodes}
	if err := w.GraphWriter.Apply(ctx, space, first); err != nil {
		return err
	}
	time.Sleep(raceWindow)
	return w.GraphWriter.Apply(ctx, space, reference.Mutation{OperationID: m.OperationID, UpsertEdges: m.UpsertEdges})
}

// writerOneSpace writes every space into one graph.
type writerOneSpace struct{ reference.GraphWriter }

func (w *writerOneSpace) Apply(ctx context.Context, _ string, m reference.Mutation) error {
	return w.GraphWriter.Apply(ctx, oneSpace, m)
}

func (w *writerOneSpace) ReadGraph(ctx context.Context, _ string) (reference.Graph, error) {
	return w.GraphWriter.ReadGraph(ctx, oneSpace)
}

func (w *writerOneSpace) ReadRecords(ctx context.Context, _ string) (reference.GraphRecords, error) {
	return w.GraphWriter.ReadRecords(ctx, oneSpace)
}

// deleteAbsentFails refuses to delete a node that is not there.
type deleteAbsentFails struct{ reference.GraphWriter }

func (w *deleteAbsentFails) Apply(ctx context.Context, space string, m reference.Mutation) error {
	if len(m.DeleteNodes) > 0 {
		g, err := w.GraphWriter.ReadGraph(ctx, space)
		if err != nil {
			return err
		}
		for _, id := range m.DeleteNodes {
			if _, ok := g.Nodes[id]; !ok {
				return fmt.Errorf("delete node %s: %w", id, reference.ErrNotFound)
			}
		}
	}
	return w.GraphWriter.Apply(ctx, space, m)
}

// rankless keys edges by (source, type, target), dropping the
// discriminator.
type rankless struct{ reference.GraphWriter }

func (w *rankless) Apply(ctx context.Context, space string, m reference.Mutation) error {
	m = m.Clone()
	for i := range m.UpsertEdges {
		m.UpsertEdges[i].Key.Rank = 0
	}
	for i := range m.DeleteEdges {
		m.DeleteEdges[i].Rank = 0
	}
	return w.GraphWriter.Apply(ctx, space, m)
}

// aliasingReader hands out the same maps on every read (a cache the caller
// can write into).
type aliasingReader struct {
	reference.GraphWriter
	mu    sync.Mutex
	cache map[string]reference.Graph
}

func newAliasingReader(w reference.GraphWriter) *aliasingReader {
	return &aliasingReader{GraphWriter: w, cache: map[string]reference.Graph{}}
}

func (w *aliasingReader) Apply(ctx context.Context, space string, m reference.Mutation) error {
	w.mu.Lock()
	delete(w.cache, space)
	w.mu.Unlock()
	return w.GraphWriter.Apply(ctx, space, m)
}

func (w *aliasingReader) ReadGraph(ctx context.Context, space string) (reference.Graph, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g, ok := w.cache[space]; ok {
		return g, nil
	}
	g, err := w.GraphWriter.ReadGraph(ctx, space)
	if err == nil {
		w.cache[space] = g
	}
	return g, err
}

// ---------------------------------------------------------------------------
// LockProvider members

// neverExpires stamps every lease far in the future.
type neverExpires struct{ reference.LockProvider }

const forever = int64(1) << 50

func (p *neverExpires) TryAcquire(ctx context.Context, space, doc, holder string, now, ttl int64) (reference.Lease, bool, error) {
	l, ok, err := p.LockProvider.TryAcquire(ctx, space, doc, holder, now, forever)
	return l, ok, err
}

func (p *neverExpires) Renew(ctx context.Context, l reference.Lease, now, ttl int64) (reference.Lease, error) {
	return p.LockProvider.Renew(ctx, l, now, forever)
}

// reacquireNewToken releases and acquires again when the holder asks
// twice, so the token changes under it.
type reacquireNewToken struct{ reference.LockProvider }

func (p *reacquireNewToken) TryAcquire(ctx context.Context, space, doc, holder string, now, ttl int64) (reference.Lease, bool, error) {
	if cur, free, err := p.LockProvider.TryAcquire(ctx, space, doc, holder+"#probe", now, ttl); err == nil {
		if free {
			_ = p.LockProvider.Release(ctx, cur)
		} else if cur.Holder == holder {
			_ = p.LockProvider.Release(ctx, cur)
		}
	}
	return p.LockProvider.TryAcquire(ctx, space, doc, holder, now, ttl)
}

// lockOneSpace keys leases by documentId alone.
type lockOneSpace struct{ reference.LockProvider }

func (p *lockOneSpace) TryAcquire(ctx context.Context, space, doc, holder string, now, ttl int64) (reference.Lease, bool, error) {
	if space == "" {
		return p.LockProvider.TryAcquire(ctx, space, doc, holder, now, ttl)
	}
	l, ok, err := p.LockProvider.TryAcquire(ctx, oneSpace, doc, holder, now, ttl)
	l.Space = space
	return l, ok, err
}

func (p *lockOneSpace) Renew(ctx context.Context, l reference.Lease, now, ttl int64) (reference.Lease, error) {
	space := l.Space
	l.Space = oneSpace
	out, err := p.LockProvider.Renew(ctx, l, now, ttl)
	out.Space = space
	return out, err
}

func (p *lockOneSpace) Release(ctx context.Context, l reference.Lease) error {
	l.Space = oneSpace
	return p.LockProvider.Release(ctx, l)
}

// releaseTwice answers a second release of the same lease with success.
type releaseTwice struct {
	reference.LockProvider
	released sync.Map
}

func (p *releaseTwice) Release(ctx context.Context, l reference.Lease) error {
	err := p.LockProvider.Release(ctx, l)
	if err == nil {
		p.released.Store(l, true)
	} else if _, again := p.released.Load(l); again {
		return nil
	}
	return err
}

// blankHolder accepts an empty holder name (filling in a default).
type blankHolder struct{ reference.LockProvider }

func (p *blankHolder) TryAcquire(ctx context.Context, space, doc, holder string, now, ttl int64) (reference.Lease, bool, error) {
	if holder == "" {
		holder = "anonymous"
	}
	return p.LockProvider.TryAcquire(ctx, space, doc, holder, now, ttl)
}

// expiryInclusive treats a lease as live through its expiry instant (now
// <= ExpiresAt), one millisecond longer than the contract.
type expiryInclusive struct{ reference.LockProvider }

func (p *expiryInclusive) TryAcquire(ctx context.Context, space, doc, holder string, now, ttl int64) (reference.Lease, bool, error) {
	return p.LockProvider.TryAcquire(ctx, space, doc, holder, now-1, ttl+1)
}
