package properties

import (
	"errors"
	"fmt"
	"math/rand"
	"sort"

	"github.com/crashmatrix/crashmatrix/reference"
)

// runDocumentStateStore runs the DocumentStateStore suite on a suiteT (a
// *testing.T or a recorder).
func runDocumentStateStore(t suiteT, newStore func(t suiteT) reference.DocumentStateStore) {
	t.Helper()
	confRun(t, newStore, stateStoreCases)
}

// The subtest names of the DocumentStateStore suite.
const (
	subStateCASExactlyOneRevision = "CompareAndSetAdvancesExactlyOneRevision"    // a commit advances the revision by exactly one
	subStateCASConcurrent         = "ConcurrentInitialCompareAndSetSingleWinner" // racing commits from one revision: exactly one wins
	subStateSpaceIsolation        = "SpaceIsolation"                             // the same documentId in two spaces are two documents
	subStateFindByOperationID     = "FindByOperationIDCurrentAndHistory"         // the state of an operation is found, current or in history
	subStateVersions              = "VersionsIdempotentAscendingDetached"        // history is idempotent, ascending and returned as a copy
	subStateRemove                = "RemoveIsRevisionProtected"                  // remove needs the current revision
	subStateFactSources           = "IsReferencedByOtherDocument"                // edge support counts only ACTIVE other documents of the space
	subStateBlankIDs              = "BlankIDsAreInvalid"                         // blank space or documentId wrap ErrInvalidArgument
	subStateDetached              = "ReturnedStatesAreDetached"                  // values passed in or returned do not alias the store
	subStateModel                 = "ModelBasedCommands"                         // gopter commands against a model of the store
)

var stateStoreCases = []confCase[reference.DocumentStateStore]{
	{subStateCASExactlyOneRevision, stateCASExactlyOne},
	{subStateCASConcurrent, stateCASConcurrent},
	{subStateSpaceIsolation, stateSpaceIsolation},
	{subStateFindByOperationID, stateFindByOperationID},
	{subStateVersions, stateVersions},
	{subStateRemove, stateRemove},
	{subStateFactSources, stateFactSources},
	{subStateBlankIDs, stateBlankIDs},
	{subStateDetached, stateDetached},
	{subStateModel, stateModel},
}

// stateAt builds a committed state of a document.
func stateAt(space, doc string, rev int64, opID string, edges ...reference.EdgeKey) reference.DocumentState {
	return reference.DocumentState{
		Space: space, DocumentID: doc, Revision: rev, OperationID: opID,
		ContentHash: fmt.Sprintf("hash-%d", rev), ExtractionFingerprint: "xf-" + opID,
		Status: reference.DocActive, FactSources: edges, NodeIDs: []string{"n:" + doc}, CommittedAt: rev,
	}
}

// stateCAS runs CompareAndSet and fails t unless it returns want, nil.
func stateCAS(t suiteT, s reference.DocumentStateStore, expected int64, next reference.DocumentState, want bool) {
	t.Helper()
	ok, err := s.CompareAndSet(confCtx, expected, next)
	if err != nil || ok != want {
		t.Fatalf("CompareAndSet(expected %d, %s/%s r%d) = %v, %v; want %v, nil", expected, next.Space, next.DocumentID, next.Revision, ok, err, want)
	}
}

// stateExpectCurrent fails t unless the current state is want (or absent
// when want is nil).
func stateExpectCurrent(t suiteT, s reference.DocumentStateStore, space, doc string, want *reference.DocumentState, context string) {
	t.Helper()
	got, ok, err := s.FindCurrent(confCtx, space, doc)
	switch {
	case err != nil:
		t.Errorf("%s: FindCurrent(%s, %s) error: %v", context, space, doc, err)
	case want == nil && ok:
		t.Errorf("%s: FindCurrent(%s, %s) = r%d (%s); want absent", context, space, doc, got.Revision, got.OperationID)
	case want != nil && !ok:
		t.Errorf("%s: FindCurrent(%s, %s) = absent; want r%d (%s)", context, space, doc, want.Revision, want.OperationID)
	case want != nil && !confEqual(got, *want):
		t.Errorf("%s: FindCurrent(%s, %s) differs:%s", context, space, doc, confDiff(*want, got))
	}
}

func stateCASExactlyOne(t suiteT, fresh func() reference.DocumentStateStore) {
	s := fresh()
	r1 := stateAt("space_a", "doc-1", 1, "op-1")
	r2 := stateAt("space_a", "doc-1", 2, "op-2")
	r3 := stateAt("space_a", "doc-1", 3, "op-3")
	stateCAS(t, s, 0, r1, true)
	stateExpectCurrent(t, s, "space_a", "doc-1", &r1, "after 0->1")
	if ok, err := s.CompareAndSet(confCtx, 0, r2); ok || !errors.Is(err, reference.ErrInvalidRevision) {
		t.Errorf("CompareAndSet(expected 0, r2) = %v, %v; want false and ErrInvalidRevision (next must be expected+1)", ok, err)
	}
	if ok, err := s.CompareAndSet(confCtx, 1, r3); ok || !errors.Is(err, reference.ErrInvalidRevision) {
		t.Errorf("CompareAndSet(expected 1, r3) = %v, %v; want false and ErrInvalidRevision (a jump)", ok, err)
	}
	neg := stateAt("space_a", "doc-1", 0, "op-neg")
	if ok, err := s.CompareAndSet(confCtx, -1, neg); ok || !errors.Is(err, reference.ErrInvalidRevision) {
		t.Errorf("CompareAndSet(expected -1, r0) = %v, %v; want false and ErrInvalidRevision (negative expected)", ok, err)
	}
	same := stateAt("space_a", "doc-1", 1, "op-same")
	if ok, err := s.CompareAndSet(confCtx, 1, same); ok || !errors.Is(err, reference.ErrInvalidRevision) {
		t.Errorf("CompareAndSet(expected 1, r1) = %v, %v; want false and ErrInvalidRevision (no advance)", ok, err)
	}
	stateExpectCurrent(t, s, "space_a", "doc-1", &r1, "after the rejected jumps")
	stateCAS(t, s, 1, r2, true)
	stateExpectCurrent(t, s, "space_a", "doc-1", &r2, "after 1->2")
	stale := stateAt("space_a", "doc-1", 2, "op-stale")
	if ok, err := s.CompareAndSet(confCtx, 1, stale); ok || err != nil {
		t.Errorf("CompareAndSet(stale expected 1, r2 of another op) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.CompareAndSet(confCtx, 0, stateAt("space_a", "doc-1", 1, "op-stale0")); ok || err != nil {
		t.Errorf("CompareAndSet(stale expected 0 on an existing doc, r1) = %v, %v; want false, nil", ok, err)
	}
	stateExpectCurrent(t, s, "space_a", "doc-1", &r2, "after the stale CompareAndSets")
	if ok, err := s.CompareAndSet(confCtx, 5, stateAt("space_a", "doc-1", 6, "op-ahead")); ok || err != nil {
		t.Errorf("CompareAndSet(expected 5 ahead of current 2, r6) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.CompareAndSet(confCtx, 1, stateAt("space_a", "doc-new", 2, "op-new")); ok || err != nil {
		t.Errorf("CompareAndSet(expected 1 on an absent doc, r2) = %v, %v; want false, nil", ok, err)
	}
	stateExpectCurrent(t, s, "space_a", "doc-new", nil, "after a CompareAndSet from 1 on an absent doc")
	stateCAS(t, s, 2, r3, true)
	stateExpectCurrent(t, s, "space_a", "doc-1", &r3, "after 2->3")
}

func stateCASConcurrent(t suiteT, fresh func() reference.DocumentStateStore) {
	s := fresh()
	for round := 0; round < 5; round++ {
		doc := fmt.Sprintf("doc-%d", round)
		for _, from := range []int64{0, 1} {
			if from == 1 {
				// Advance to 1 first, then race for 2.
				cur, _, _ := s.FindCurrent(confCtx, "space_a", doc)
				if cur.Revision != 1 {
					t.Fatalf("round %d: revision after the first race is %d; want 1", round, cur.Revision)
				}
			}
			type res struct {
				ok  bool
				err error
			}
			nexts := make([]reference.DocumentState, confWorkers)
			for i := range nexts {
				nexts[i] = stateAt("space_a", doc, from+1, fmt.Sprintf("op-%d-%d", from, i))
			}
			results := confRace(confWorkers, func(i int) res {
				ok, err := s.CompareAndSet(confCtx, from, nexts[i])
				return res{ok, err}
			})
			var winners []int
			for i, r := range results {
				if r.err != nil {
					t.Errorf("round %d: concurrent CompareAndSet(%d->%d) #%d error: %v", round, from, from+1, i, r.err)
				}
				if r.ok {
					winners = append(winners, i)
				}
			}
			if len(winners) != 1 {
				t.Fatalf("round %d: %d concurrent CompareAndSet(%d->%d): winners %s; want exactly one", round, confWorkers, from, from+1, confShow(winners))
			}
			stateExpectCurrent(t, s, "space_a", doc, &nexts[winners[0]], fmt.Sprintf("round %d after the race won by #%d", round, winners[0]))
		}
	}
}

func stateSpaceIsolation(t suiteT, fresh func() reference.DocumentStateStore) {
	s := fresh()
	a := stateAt("space_a", "doc-1", 1, "op-a")
	b := stateAt("space_b", "doc-1", 1, "op-b")
	stateCAS(t, s, 0, a, true)
	stateCAS(t, s, 0, b, true)
	stateExpectCurrent(t, s, "space_a", "doc-1", &a, "space_a")
	stateExpectCurrent(t, s, "space_b", "doc-1", &b, "space_b")
	for space, want := range map[string]reference.DocumentState{"space_a": a, "space_b": b} {
		l, err := s.List(confCtx, space)
		if err != nil || !confEqual(l, []reference.DocumentState{want}) {
			t.Errorf("List(%s): %v; want exactly [%s r1]:%s", space, err, want.OperationID, confDiff([]reference.DocumentState{want}, l))
		}
	}
	if l, err := s.List(confCtx, "space_c"); err != nil || len(l) != 0 {
		t.Errorf("List(space_c) = %s, %v; want empty", confShow(l), err)
	}
	if _, ok, _ := s.FindByOperationID(confCtx, "space_a", "doc-1", "op-b"); ok {
		t.Errorf("FindByOperationID(space_a, doc-1, op-b) found space_b's state; want absent")
	}
	if ok, err := s.Remove(confCtx, "space_a", "doc-1", 1); err != nil || !ok {
		t.Errorf("Remove(space_a, doc-1, 1) = %v, %v; want true, nil", ok, err)
	}
	stateExpectCurrent(t, s, "space_b", "doc-1", &b, "space_b after removing space_a's doc-1")
	if err := s.RecordVersion(confCtx, b); err != nil {
		t.Fatalf("RecordVersion(space_b r1): %v", err)
	}
	if v, err := s.Versions(confCtx, "space_a", "doc-1"); err != nil || len(v) != 0 {
		t.Errorf("Versions(space_a, doc-1) = %v, %v; want none (only space_b recorded a version)", v, err)
	}
	// Revisions are per space: space_a can start again from 0.
	stateCAS(t, s, 0, stateAt("space_a", "doc-1", 1, "op-a2"), true)
	stateExpectCurrent(t, s, "space_b", "doc-1", &b, "space_b after space_a restarted")
}

func stateFindByOperationID(t suiteT, fresh func() reference.DocumentStateStore) {
	s := fresh()
	r1 := stateAt("space_a", "doc-1", 1, "op-1")
	r2 := stateAt("space_a", "doc-1", 2, "op-2")
	stateCAS(t, s, 0, r1, true)
	find := func(op string, want *reference.DocumentState, context string) {
		t.Helper()
		got, ok, err := s.FindByOperationID(confCtx, "space_a", "doc-1", op)
		switch {
		case err != nil:
			t.Errorf("%s: FindByOperationID(%s) error: %v", context, op, err)
		case want == nil && ok:
			t.Errorf("%s: FindByOperationID(%s) = r%d; want absent", context, op, got.Revision)
		case want != nil && !ok:
			t.Errorf("%s: FindByOperationID(%s) = absent; want r%d", context, op, want.Revision)
		case want != nil && !confEqual(got, *want):
			t.Errorf("%s: FindByOperationID(%s) differs:%s", context, op, confDiff(*want, got))
		}
	}
	find("op-1", &r1, "current, not yet in history")
	find("op-2", nil, "not committed")
	if err := s.RecordVersion(confCtx, r1); err != nil {
		t.Fatalf("RecordVersion(r1): %v", err)
	}
	stateCAS(t, s, 1, r2, true)
	find("op-2", &r2, "current")
	find("op-1", &r1, "historical (recorded, then superseded)")
	find("op-3", nil, "never committed")
	if _, ok, err := s.FindByOperationID(confCtx, "space_a", "doc-2", "op-1"); err != nil || ok {
		t.Errorf("FindByOperationID(space_a, doc-2, op-1) = %v, %v; want absent (op-1 committed doc-1)", ok, err)
	}
}

func stateVersions(t suiteT, fresh func() reference.DocumentStateStore) {
	s := fresh()
	r1 := stateAt("space_a", "doc-1", 1, "op-1", reference.EdgeKey{Source: "a", Type: "R", Target: "b"})
	r2 := stateAt("space_a", "doc-1", 2, "op-2")
	r3 := stateAt("space_a", "doc-1", 3, "op-3")
	for _, v := range []reference.DocumentState{r2, r1, r1, r3, r2} {
		if err := s.RecordVersion(confCtx, v); err != nil {
			t.Fatalf("RecordVersion(r%d): %v; want nil (recording again is a no-op)", v.Revision, err)
		}
	}
	other := r1
	other.OperationID, other.ContentHash = "op-other", "other"
	if err := s.RecordVersion(confCtx, other); err != nil {
		t.Errorf("RecordVersion(r1 again with other content) = %v; want nil (a no-op)", err)
	}
	want := []reference.DocumentState{r1, r2, r3}
	got, err := s.Versions(confCtx, "space_a", "doc-1")
	if err != nil || !confEqual(got, want) {
		t.Fatalf("Versions(space_a, doc-1): %v; want r1, r2, r3 once each, ascending, first recording kept:%s", err, confDiff(want, got))
	}
	got[0].OperationID, got[0].Revision = "mutated", 99
	got[1].FactSources = append(got[1].FactSources, reference.EdgeKey{Source: "x"})
	if len(got[0].FactSources) > 0 {
		got[0].FactSources[0].Source = "mutated"
	}
	if len(got[0].NodeIDs) > 0 {
		got[0].NodeIDs[0] = "mutated"
	}
	again, err := s.Versions(confCtx, "space_a", "doc-1")
	if err != nil || !confEqual(again, want) {
		t.Errorf("after mutating a returned slice, Versions(space_a, doc-1): %v; want the stored history unchanged:%s", err, confDiff(want, again))
	}
	if v, err := s.Versions(confCtx, "space_a", "doc-none"); err != nil || len(v) != 0 {
		t.Errorf("Versions of a document without history = %v, %v; want empty, nil", v, err)
	}
}

func stateRemove(t suiteT, fresh func() reference.DocumentStateStore) {
	s := fresh()
	r1 := stateAt("space_a", "doc-1", 1, "op-1")
	stateCAS(t, s, 0, r1, true)
	if ok, err := s.Remove(confCtx, "space_a", "doc-1", 2); ok || err != nil {
		t.Errorf("Remove(revision 2) while current is 1 = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.Remove(confCtx, "space_a", "doc-1", 0); ok || err != nil {
		t.Errorf("Remove(revision 0) while current is 1 = %v, %v; want false, nil", ok, err)
	}
	stateExpectCurrent(t, s, "space_a", "doc-1", &r1, "after Remove with a wrong revision")
	if ok, err := s.Remove(confCtx, "space_a", "doc-1", 1); !ok || err != nil {
		t.Errorf("Remove(revision 1) while current is 1 = %v, %v; want true, nil", ok, err)
	}
	stateExpectCurrent(t, s, "space_a", "doc-1", nil, "after Remove")
	if ok, err := s.Remove(confCtx, "space_a", "doc-1", 1); ok || err != nil {
		t.Errorf("second Remove(revision 1) = %v, %v; want false, nil", ok, err)
	}
	if l, err := s.List(confCtx, "space_a"); err != nil || len(l) != 0 {
		t.Errorf("List(space_a) after Remove = %v, %v; want empty", l, err)
	}
	if ok, err := s.Remove(confCtx, "space_a", "doc-never", 1); ok || err != nil {
		t.Errorf("Remove of a document that never existed = %v, %v; want false, nil", ok, err)
	}
}

func stateFactSources(t suiteT, fresh func() reference.DocumentStateStore) {
	s := fresh()
	shared := reference.EdgeKey{Source: "a", Type: "REL", Target: "b"}
	onlyRetracted := reference.EdgeKey{Source: "a", Type: "REL", Target: "c"}
	onlyOtherSpace := reference.EdgeKey{Source: "a", Type: "REL", Target: "d"}
	ranked := reference.EdgeKey{Source: "a", Type: "REL", Target: "b", Rank: 1}
	active := stateAt("space_a", "active", 1, "op-active", shared)
	retracted := stateAt("space_a", "retracted", 1, "op-retracted", shared, onlyRetracted)
	retracted.Status = reference.DocRetracted
	elsewhere := stateAt("space_b", "elsewhere", 1, "op-elsewhere", shared, onlyOtherSpace)
	for _, st := range []reference.DocumentState{active, retracted, elsewhere} {
		stateCAS(t, s, 0, st, true)
	}
	check := func(space, doc string, edge reference.EdgeKey, want bool, why string) {
		t.Helper()
		got, err := s.IsReferencedByOtherDocument(confCtx, space, doc, edge)
		if err != nil || got != want {
			t.Errorf("IsReferencedByOtherDocument(%s, %q, %s) = %v, %v; want %v: %s", space, doc, edge, got, err, want, why)
		}
	}
	check("space_a", "missing", shared, true, "the ACTIVE document 'active' supports it")
	check("space_a", "active", shared, false, "only the asking document and a RETRACTED one support it")
	check("space_a", "retracted", shared, true, "'active' supports it")
	check("space_a", "", shared, true, "an empty documentId excludes nothing")
	check("space_a", "missing", onlyRetracted, false, "only a RETRACTED document lists it")
	check("space_a", "missing", onlyOtherSpace, false, "only a document of space_b lists it")
	check("space_b", "missing", onlyOtherSpace, true, "'elsewhere' in space_b supports it")
	check("space_a", "missing", ranked, false, "the rank is part of the EdgeKey")
	check("space_c", "missing", shared, false, "space_c has no documents")
	// A newer revision of 'active' that no longer lists the edge drops its
	// support; history does not count.
	if err := s.RecordVersion(confCtx, active); err != nil {
		t.Fatalf("RecordVersion(active r1): %v", err)
	}
	r2 := stateAt("space_a", "active", 2, "op-active-2", shared)
	r2.Status = reference.DocRetracted
	stateCAS(t, s, 1, r2, true)
	check("space_a", "missing", shared, false, "'active' r2 is RETRACTED; r1 is history only")
	stateCAS(t, s, 2, stateAt("space_a", "active", 3, "op-active-3"), true)
	check("space_a", "missing", shared, false, "'active' r3 no longer lists it")
}

func stateBlankIDs(t suiteT, fresh func() reference.DocumentStateStore) {
	s := fresh()
	for _, key := range [][2]string{{"", "doc-1"}, {"  ", "doc-1"}, {"space_a", ""}, {"space_a", "\t"}} {
		space, doc := key[0], key[1]
		name := fmt.Sprintf("%q/%q", space, doc)
		is := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, reference.ErrInvalidArgument) {
				t.Errorf("%s with blank key %s: error %v; want ErrInvalidArgument", what, name, err)
			}
		}
		ok, err := s.CompareAndSet(confCtx, 0, stateAt(space, doc, 1, "op-1"))
		is("CompareAndSet", err)
		if ok {
			t.Errorf("CompareAndSet with blank key %s returned true", name)
		}
		_, _, err = s.FindCurrent(confCtx, space, doc)
		is("FindCurrent", err)
		_, err = s.Remove(confCtx, space, doc, 1)
		is("Remove", err)
		is("RecordVersion", s.RecordVersion(confCtx, stateAt(space, doc, 1, "op-1")))
		_, err = s.Versions(confCtx, space, doc)
		is("Versions", err)
		_, _, err = s.FindByOperationID(confCtx, space, doc, "op-1")
		is("FindByOperationID", err)
	}
	if l, err := s.List(confCtx, "space_a"); err != nil || len(l) != 0 {
		t.Errorf("after rejected blank-key calls, List(space_a) = %v, %v; want empty", l, err)
	}
}

func stateDetached(t suiteT, fresh func() reference.DocumentStateStore) {
	s := fresh()
	edge := reference.EdgeKey{Source: "a", Type: "R", Target: "b"}
	r1 := stateAt("space_a", "doc-1", 1, "op-1", edge)
	in := confCanon(r1)
	stateCAS(t, s, 0, in, true)
	in.FactSources[0].Target = "mutated-after-commit"
	in.NodeIDs[0] = "mutated-after-commit"
	stateExpectCurrent(t, s, "space_a", "doc-1", &r1, "after mutating the committed value")
	got, _, _ := s.FindCurrent(confCtx, "space_a", "doc-1")
	if len(got.FactSources) > 0 {
		got.FactSources[0].Target = "mutated-after-read"
	}
	l, _ := s.List(confCtx, "space_a")
	if len(l) > 0 && len(l[0].NodeIDs) > 0 {
		l[0].NodeIDs[0] = "mutated-after-list"
	}
	stateExpectCurrent(t, s, "space_a", "doc-1", &r1, "after mutating returned values")
}

// stateModelStore is the model of a DocumentStateStore.
type stateModelStore struct {
	s        reference.DocumentStateStore
	current  map[[2]string]reference.DocumentState
	versions map[[2]string]map[int64]reference.DocumentState
	nextOp   int
}

var stateModelEdges = []reference.EdgeKey{
	{Source: "a", Type: "R", Target: "b"},
	{Source: "b", Type: "R", Target: "c"},
	{Source: "a", Type: "R", Target: "b", Rank: 1},
}

func stateModel(t suiteT, fresh func() reference.DocumentStateStore) {
	prop := confModelProp(t, func() *stateModelStore {
		return &stateModelStore{s: fresh(), current: map[[2]string]reference.DocumentState{}, versions: map[[2]string]map[int64]reference.DocumentState{}}
	}, stateModelPick)
	confCheckProp(t, "DocumentStateStore commands", prop, 40, 40)
}

func stateModelPick(r *rand.Rand) *confStep[*stateModelStore] {
	key := [2]string{confOneOf(r, "space_a", "space_b"), confOneOf(r, "doc-1", "doc-2", "doc-3")}
	switch k := r.Intn(100); {
	case k < 35:
		d1 := confOneOf(r, 0, 0, 0, 0, -1, 1, -2)
		d2 := confOneOf(r, 1, 1, 1, 1, 0, 2)
		status := confOneOf(r, reference.DocActive, reference.DocActive, reference.DocRetracted)
		var edges []reference.EdgeKey
		for _, e := range stateModelEdges {
			if r.Intn(2) == 0 {
				edges = append(edges, e)
			}
		}
		desc := fmt.Sprintf("CompareAndSet(%s/%s, expected current%+d, next expected%+d, %s, %d edges)", key[0], key[1], d1, d2, status, len(edges))
		return &confStep[*stateModelStore]{desc, func(m *stateModelStore) string { return m.cas(key, int64(d1), int64(d2), status, edges) }}
	case k < 45:
		d := confOneOf(r, 0, 0, -1, 1)
		return &confStep[*stateModelStore]{fmt.Sprintf("Remove(%s/%s, current%+d)", key[0], key[1], d), func(m *stateModelStore) string { return m.remove(key, int64(d)) }}
	case k < 60:
		return &confStep[*stateModelStore]{fmt.Sprintf("RecordVersion(current of %s/%s)", key[0], key[1]), func(m *stateModelStore) string { return m.record(key) }}
	case k < 70:
		return &confStep[*stateModelStore]{fmt.Sprintf("FindCurrent(%s/%s)", key[0], key[1]), func(m *stateModelStore) string { return m.findCurrent(key) }}
	case k < 78:
		return &confStep[*stateModelStore]{fmt.Sprintf("Versions(%s/%s)", key[0], key[1]), func(m *stateModelStore) string { return m.versionsOf(key) }}
	case k < 86:
		n := r.Intn(8)
		return &confStep[*stateModelStore]{fmt.Sprintf("FindByOperationID(%s/%s, op-%d)", key[0], key[1], n), func(m *stateModelStore) string { return m.findByOp(key, fmt.Sprintf("op-%d", n)) }}
	case k < 94:
		e := confOneOf(r, stateModelEdges...)
		asker := confOneOf(r, key[1], "", "doc-9")
		return &confStep[*stateModelStore]{fmt.Sprintf("IsReferencedByOtherDocument(%s, %q, %s)", key[0], asker, e), func(m *stateModelStore) string { return m.referenced(key[0], asker, e) }}
	default:
		return &confStep[*stateModelStore]{fmt.Sprintf("List(%s)", key[0]), func(m *stateModelStore) string { return m.list(key[0]) }}
	}
}

func (m *stateModelStore) cas(key [2]string, d1, d2 int64, status reference.DocStatus, edges []reference.EdgeKey) string {
	cur, exists := m.current[key]
	expected := d1
	if exists {
		expected += cur.Revision
	}
	op := fmt.Sprintf("op-%d", m.nextOp)
	m.nextOp++
	next := stateAt(key[0], key[1], expected+d2, op, edges...)
	next.Status = status
	ok, err := m.s.CompareAndSet(confCtx, expected, next)
	switch {
	case expected < 0 || next.Revision != expected+1:
		if ok || !errors.Is(err, reference.ErrInvalidRevision) {
			return confMismatch(fmt.Sprintf("CompareAndSet(expected %d, r%d)", expected, next.Revision), "false, ErrInvalidRevision", fmt.Sprintf("%v, %v", ok, err))
		}
	case (exists && cur.Revision == expected) || (!exists && expected == 0):
		if !ok || err != nil {
			return confMismatch(fmt.Sprintf("CompareAndSet(expected %d = current, r%d)", expected, next.Revision), "true, nil", fmt.Sprintf("%v, %v", ok, err))
		}
		m.current[key] = next
	default:
		if ok || err != nil {
			return confMismatch(fmt.Sprintf("CompareAndSet(stale expected %d, current exists=%v r%d)", expected, exists, cur.Revision), "false, nil", fmt.Sprintf("%v, %v", ok, err))
		}
	}
	return m.findCurrent(key)
}

func (m *stateModelStore) remove(key [2]string, d int64) string {
	cur, exists := m.current[key]
	rev := cur.Revision + d
	ok, err := m.s.Remove(confCtx, key[0], key[1], rev)
	want := exists && rev == cur.Revision
	if err != nil || ok != want {
		return confMismatch(fmt.Sprintf("Remove(revision %d; current exists=%v r%d)", rev, exists, cur.Revision), want, fmt.Sprintf("%v, %v", ok, err))
	}
	if ok {
		delete(m.current, key)
	}
	return m.findCurrent(key)
}

func (m *stateModelStore) record(key [2]string) string {
	cur, exists := m.current[key]
	if !exists {
		return ""
	}
	if err := m.s.RecordVersion(confCtx, cur); err != nil {
		return confMismatch("RecordVersion", "nil", err)
	}
	if m.versions[key] == nil {
		m.versions[key] = map[int64]reference.DocumentState{}
	}
	if _, dup := m.versions[key][cur.Revision]; !dup {
		m.versions[key][cur.Revision] = cur
	}
	return ""
}

func (m *stateModelStore) findCurrent(key [2]string) string {
	got, ok, err := m.s.FindCurrent(confCtx, key[0], key[1])
	want, exists := m.current[key]
	if err != nil || ok != exists {
		return confMismatch(fmt.Sprintf("FindCurrent(%s/%s)", key[0], key[1]), fmt.Sprintf("%v %s", exists, confShow(want)), fmt.Sprintf("%v %s, %v", ok, confShow(got), err))
	}
	if ok && !confEqual(got, want) {
		return confMismatchAt(fmt.Sprintf("FindCurrent(%s/%s)", key[0], key[1]), want, got, nil)
	}
	return ""
}

func (m *stateModelStore) versionsOf(key [2]string) string {
	var want []reference.DocumentState
	for _, v := range m.versions[key] {
		want = append(want, v)
	}
	sort.Slice(want, func(i, j int) bool { return want[i].Revision < want[j].Revision })
	got, err := m.s.Versions(confCtx, key[0], key[1])
	if err != nil || !confEqual(got, want) {
		return confMismatchAt(fmt.Sprintf("Versions(%s/%s)", key[0], key[1]), want, got, err)
	}
	return ""
}

func (m *stateModelStore) findByOp(key [2]string, op string) string {
	var want *reference.DocumentState
	if cur, ok := m.current[key]; ok && cur.OperationID == op {
		want = &cur
	} else {
		for _, v := range m.versions[key] {
			if v.OperationID == op {
				v := v
				want = &v
			}
		}
	}
	got, ok, err := m.s.FindByOperationID(confCtx, key[0], key[1], op)
	if err != nil || ok != (want != nil) {
		return confMismatch(fmt.Sprintf("FindByOperationID(%s/%s, %s)", key[0], key[1], op), want, fmt.Sprintf("%v %s, %v", ok, confShow(got), err))
	}
	if ok && !confEqual(got, *want) {
		return confMismatchAt(fmt.Sprintf("FindByOperationID(%s/%s, %s)", key[0], key[1], op), *want, got, nil)
	}
	return ""
}

func (m *stateModelStore) referenced(space, asker string, e reference.EdgeKey) string {
	want := false
	for k, st := range m.current {
		if k[0] == space && k[1] != asker && st.Status == reference.DocActive && st.Supports(e) {
			want = true
		}
	}
	got, err := m.s.IsReferencedByOtherDocument(confCtx, space, asker, e)
	if err != nil || got != want {
		return confMismatch(fmt.Sprintf("IsReferencedByOtherDocument(%s, %q, %s)", space, asker, e), want, fmt.Sprintf("%v, %v", got, err))
	}
	return ""
}

func (m *stateModelStore) list(space string) string {
	var want []reference.DocumentState
	for k, st := range m.current {
		if k[0] == space {
			want = append(want, st)
		}
	}
	sort.Slice(want, func(i, j int) bool { return want[i].DocumentID < want[j].DocumentID })
	got, err := m.s.List(confCtx, space)
	if err != nil || !confEqual(got, want) {
		return confMismatchAt(fmt.Sprintf("List(%s)", space), want, got, err)
	}
	return ""
}
