package properties

import (
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sort"

	"github.com/crashmatrix/crashmatrix/reference"
)

// runEntityRegistry runs the EntityRegistry suite on a suiteT (a *testing.T or a recorder).
func runEntityRegistry(t suiteT, newStore func(t suiteT) reference.EntityRegistry) {
	t.Helper()
	confRun(t, newStore, registryCases)
}

// The subtest names of the EntityRegistry suite.
const (
	subRegSaveAndFind       = "SaveAndFindByNameAndAlias"     // entities are found by canonical name and by alias
	subRegNormalisation     = "NamesAreNormalised"            // names match after NFKC, case and whitespace folding
	subRegConflictAllOrNone = "ConflictSavesNothing"          // a batch with a conflict saves nothing
	subRegConflictInBatch   = "ConflictWithinOneBatch"        // two node ids for one name within a batch conflict
	subRegSaveAgainNoOp     = "SaveAgainIsNoOp"               // saving the same registrations again changes nothing
	subRegAliasesMerged     = "AliasesAreMerged"              // aliases and properties saved for one node accumulate
	subRegConcurrentUnique  = "ConcurrentSaveKeepsNameUnique" // racing saves of one name to different nodes: one wins
	subRegSpaceIsolation    = "SpaceIsolation"                // names are unique per space only
	subRegTypeInKey         = "TypeIsPartOfTheKey"            // names are unique per entity type only
	subRegModel             = "ModelBasedCommands"            // gopter commands against a model of the registry
)

var registryCases = []confCase[reference.EntityRegistry]{
	{subRegSaveAndFind, regSaveAndFind},
	{subRegNormalisation, regNormalisation},
	{subRegConflictAllOrNone, regConflictAllOrNone},
	{subRegConflictInBatch, regConflictInBatch},
	{subRegSaveAgainNoOp, regSaveAgainNoOp},
	{subRegAliasesMerged, regAliasesMerged},
	{subRegConcurrentUnique, regConcurrentUnique},
	{subRegSpaceIsolation, regSpaceIsolation},
	{subRegTypeInKey, regTypeInKey},
	{subRegModel, regModel},
}

func regOf(node, typ, name string, aliases ...string) reference.EntityRegistration {
	return reference.EntityRegistration{NodeID: node, Type: typ, CanonicalName: name, Aliases: aliases}
}

// regSave saves regs and fails t on an error.
func regSave(t suiteT, s reference.EntityRegistry, space string, regs ...reference.EntityRegistration) {
	t.Helper()
	if err := s.SaveAll(confCtx, space, regs); err != nil {
		t.Fatalf("SaveAll(%s, %d registrations, first %s %q) = %v; want nil", space, len(regs), regs[0].NodeID, regs[0].CanonicalName, err)
	}
}

// regConflict saves regs and fails t unless the store reports a conflict.
func regConflict(t suiteT, s reference.EntityRegistry, space string, why string, regs ...reference.EntityRegistration) {
	t.Helper()
	if err := s.SaveAll(confCtx, space, regs); !errors.Is(err, reference.ErrRegistryConflict) {
		t.Errorf("SaveAll(%s, %s) = %v; want an error wrapping ErrRegistryConflict: %s", space, confShow(regs), err, why)
	}
}

// regFind returns the node ids FindMatches gives for names.
func regFind(t suiteT, s reference.EntityRegistry, space, typ string, names ...string) []string {
	t.Helper()
	got, err := s.FindMatches(confCtx, space, typ, names)
	if err != nil {
		t.Fatalf("FindMatches(%s, %s, %q) error: %v", space, typ, names, err)
	}
	ids := make([]string, 0, len(got))
	for _, e := range got {
		ids = append(ids, e.NodeID)
	}
	slices.Sort(ids)
	return ids
}

// regExpectFind fails t unless FindMatches gives exactly want.
func regExpectFind(t suiteT, s reference.EntityRegistry, space, typ string, names []string, want []string, why string) {
	t.Helper()
	got := regFind(t, s, space, typ, names...)
	if want == nil {
		want = []string{}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("FindMatches(%s, %s, %q) = %s; want %s: %s", space, typ, names, confShow(got), confShow(want), why)
	}
}

// regList returns the node ids of List(space).
func regList(t suiteT, s reference.EntityRegistry, space string) []reference.RegisteredEntity {
	t.Helper()
	l, err := s.List(confCtx, space)
	if err != nil {
		t.Fatalf("List(%s) error: %v", space, err)
	}
	return l
}

func regIDs(l []reference.RegisteredEntity) []string {
	out := []string{}
	for _, e := range l {
		out = append(out, e.NodeID)
	}
	return out
}

func regSaveAndFind(t suiteT, fresh func() reference.EntityRegistry) {
	s := fresh()
	alice := reference.NodeID("Person", "Alice Smith")
	r := regOf(alice, "Person", "Alice Smith", "Alice", "A. Smith")
	r.Properties = map[string]string{"role": "engineer"}
	regSave(t, s, "space_a", r)
	regExpectFind(t, s, "space_a", "Person", []string{"Alice Smith"}, []string{alice}, "canonical name")
	regExpectFind(t, s, "space_a", "Person", []string{"A. Smith"}, []string{alice}, "alias")
	regExpectFind(t, s, "space_a", "Person", []string{"Alice", "Alice Smith", "nobody"}, []string{alice}, "several names of one entity give it once")
	regExpectFind(t, s, "space_a", "Person", []string{"Bob"}, nil, "an unknown name")
	regExpectFind(t, s, "space_a", "Person", nil, nil, "no names")
	got, err := s.FindMatches(confCtx, "space_a", "Person", []string{"alice"})
	if err != nil || len(got) != 1 {
		t.Fatalf("FindMatches(alice) = %v, %v; want one entity", got, err)
	}
	e := got[0]
	for _, n := range []string{"alice smith", "alice", "a. smith"} {
		if !slices.Contains(e.Names, n) {
			t.Errorf("registered entity Names = %q; want it to contain the normalised name %q", e.Names, n)
		}
	}
	if e.Space != "space_a" || e.NodeID != alice || reference.Normalize(e.Type) != "person" || reference.Normalize(e.CanonicalName) != "alice smith" {
		t.Errorf("registered entity = %s; want space_a, %s, type Person, canonical Alice Smith", confShow(e), alice)
	}
	if e.Properties["role"] != "engineer" {
		t.Errorf("registered entity properties = %s; want role=engineer", confShow(e.Properties))
	}
	// The returned entity is a copy.
	e.Names[0] = "mutated"
	if e.Properties != nil {
		e.Properties["role"] = "mutated"
	}
	again, _ := s.FindMatches(confCtx, "space_a", "Person", []string{"alice"})
	if len(again) != 1 || slices.Contains(again[0].Names, "mutated") || again[0].Properties["role"] != "engineer" {
		t.Errorf("after mutating a returned entity, FindMatches gives %s; want the stored entity unchanged", confShow(again))
	}
	if ids := regIDs(regList(t, s, "space_a")); fmt.Sprint(ids) != fmt.Sprint([]string{alice}) {
		t.Errorf("List(space_a) = %s; want [%s]", confShow(ids), alice)
	}
}

func regNormalisation(t suiteT, fresh func() reference.EntityRegistry) {
	s := fresh()
	regSave(t, s, "space_a", regOf("n-alice", "Person", "alice smith"), regOf("n-lin", "Character", "林默"))
	for _, q := range []string{"  ALICE  smith", "Alice Smith", "alice\tSMITH ", "ＡＬＩＣＥ Ｓｍｉｔｈ"} {
		regExpectFind(t, s, "space_a", "Person", []string{q}, []string{"n-alice"}, "names match after NFKC, case folding and whitespace collapsing")
	}
	regExpectFind(t, s, "space_a", " PERSON ", []string{"alice smith"}, []string{"n-alice"}, "the type is normalised too")
	regExpectFind(t, s, "space_a", "Character", []string{" 林默 "}, []string{"n-lin"}, "non-Latin names")
	regConflict(t, s, "space_a", "'  ALICE  smith' is the same name as 'alice smith'", regOf("n-other", "Person", "  ALICE  smith"))
	regConflict(t, s, "space_a", "an alias that normalises to a bound name", regOf("n-other", "person", "Someone", "ＡＬＩＣＥ SMITH"))
	regExpectFind(t, s, "space_a", "Person", []string{"Someone"}, nil, "the conflicting registration saved nothing")
}

func regConflictAllOrNone(t suiteT, fresh func() reference.EntityRegistry) {
	s := fresh()
	regSave(t, s, "space_a", regOf("n-alice", "Person", "Alice"))
	before := regList(t, s, "space_a")
	regConflict(t, s, "space_a", "the third registration rebinds Alice",
		regOf("n-bob", "Person", "Bob"), regOf("n-carol", "Person", "Carol", "Caz"), regOf("n-alice-2", "Person", "alice"))
	regExpectFind(t, s, "space_a", "Person", []string{"Bob", "Carol", "Caz"}, nil, "a batch with a conflict saves none of its registrations")
	regExpectFind(t, s, "space_a", "Person", []string{"Alice"}, []string{"n-alice"}, "the bound name keeps its node")
	regConflict(t, s, "space_a", "an alias rebinds Alice", regOf("n-dave", "Person", "Dave", "ALICE"))
	regExpectFind(t, s, "space_a", "Person", []string{"Dave"}, nil, "the registration whose alias conflicts saved nothing")
	regConflict(t, s, "space_a", "the existing node n-alice gains a name bound elsewhere is fine, but n-bob2 cannot take Alice",
		regOf("n-alice", "Person", "Alice", "Ally"), regOf("n-bob2", "Person", "Bobby", "Alice"))
	regExpectFind(t, s, "space_a", "Person", []string{"Ally", "Bobby"}, nil, "nothing of the failed batch, also not the new alias of n-alice")
	if after := regList(t, s, "space_a"); !confEqual(after, before) {
		t.Errorf("List(space_a) changed after failed batches:%s", confDiff(before, after))
	}
}

func regConflictInBatch(t suiteT, fresh func() reference.EntityRegistry) {
	s := fresh()
	regConflict(t, s, "space_a", "two node ids for 'eve' in one batch", regOf("n-1", "Person", "Eve"), regOf("n-2", "Person", "eve "))
	regConflict(t, s, "space_a", "an alias of one and the name of another", regOf("n-3", "Person", "Frank", "Frankie"), regOf("n-4", "Person", "FRANKIE"))
	if l := regList(t, s, "space_a"); len(l) != 0 {
		t.Errorf("List(space_a) after conflicting batches = %s; want empty", confShow(regIDs(l)))
	}
	regSave(t, s, "space_a", regOf("n-1", "Person", "Eve"), regOf("n-1", "Person", "eve", "Evie"))
	regExpectFind(t, s, "space_a", "Person", []string{"Evie"}, []string{"n-1"}, "the same node twice in one batch is fine")
}

func regSaveAgainNoOp(t suiteT, fresh func() reference.EntityRegistry) {
	s := fresh()
	batch := []reference.EntityRegistration{
		regOf("n-alice", "Person", "Alice", "Ally"),
		regOf("n-acme", "Organization", "Acme", "ACME Corp"),
	}
	batch[0].Properties = map[string]string{"age": "41"}
	regSave(t, s, "space_a", batch...)
	before := regList(t, s, "space_a")
	for i := 0; i < 3; i++ {
		regSave(t, s, "space_a", batch...)
	}
	regSave(t, s, "space_a", batch[1], batch[0])
	if after := regList(t, s, "space_a"); !confEqual(after, before) {
		t.Errorf("saving the same registrations again changed the registry (List(space_a)):%s", confDiff(before, after))
	}
	if ids := regIDs(before); fmt.Sprint(ids) != "[n-acme n-alice]" {
		t.Errorf("List(space_a) = %s; want [n-acme n-alice] ordered by node id", confShow(ids))
	}
}

func regAliasesMerged(t suiteT, fresh func() reference.EntityRegistry) {
	s := fresh()
	withProps := func(r reference.EntityRegistration, kv ...string) reference.EntityRegistration {
		r.Properties = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			r.Properties[kv[i]] = kv[i+1]
		}
		return r
	}
	regSave(t, s, "space_a", withProps(regOf("n-rob", "Person", "Robert", "Bob"), "born", "1970", "city", "Leeds"))
	regSave(t, s, "space_a", withProps(regOf("n-rob", "Person", "Robert", "Bobby"), "city", "York"))
	regSave(t, s, "space_a", regOf("n-rob", "Person", "Rob"))
	for _, n := range []string{"Robert", "Bob", "Bobby", "Rob"} {
		regExpectFind(t, s, "space_a", "Person", []string{n}, []string{"n-rob"}, "every alias ever saved for the node still matches")
	}
	l := regList(t, s, "space_a")
	if len(l) != 1 {
		t.Fatalf("List(space_a) = %s; want the one entity n-rob", confShow(regIDs(l)))
	}
	for _, n := range []string{"robert", "bob", "bobby", "rob"} {
		if !slices.Contains(l[0].Names, n) {
			t.Errorf("n-rob Names = %q; want merged names including %q", l[0].Names, n)
		}
	}
	if want := map[string]string{"born": "1970", "city": "York"}; !maps.Equal(l[0].Properties, want) {
		t.Errorf("n-rob Properties = %s; want %s (later saves add and overwrite keys, a save without properties keeps them)", confShow(l[0].Properties), confShow(want))
	}
	if l[0].CanonicalName != "Robert" || l[0].Type != "Person" {
		t.Errorf("n-rob is %s %q; want the first registration's Person %q", l[0].Type, l[0].CanonicalName, "Robert")
	}
}

func regConcurrentUnique(t suiteT, fresh func() reference.EntityRegistry) {
	s := fresh()
	for round := 0; round < 5; round++ {
		name := fmt.Sprintf("Zed %d", round)
		errs := confRace(confWorkers, func(i int) error {
			return s.SaveAll(confCtx, "space_a", []reference.EntityRegistration{
				regOf(fmt.Sprintf("n-%d-%d", round, i), "Person", name, fmt.Sprintf("alias %d %d", round, i)),
			})
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Errorf("round %d: SaveAll of %q for node #%d and #%d both succeeded; want exactly one winner", round, name, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, reference.ErrRegistryConflict):
				t.Errorf("round %d: SaveAll #%d = %v; want nil or ErrRegistryConflict", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: %d concurrent SaveAll of %q to different nodes: none succeeded; want exactly one", round, confWorkers, name)
		}
		want := fmt.Sprintf("n-%d-%d", round, winner)
		regExpectFind(t, s, "space_a", "Person", []string{name}, []string{want}, "the winner owns the name")
		for i := 0; i < confWorkers; i++ {
			if i != winner {
				regExpectFind(t, s, "space_a", "Person", []string{fmt.Sprintf("alias %d %d", round, i)}, nil, "a loser's alias was saved")
			}
		}
	}
	if l := regList(t, s, "space_a"); len(l) != 5 {
		t.Errorf("List(space_a) has %d entities after 5 races; want 5 (one winner each): %s", len(l), confShow(regIDs(l)))
	}
}

func regSpaceIsolation(t suiteT, fresh func() reference.EntityRegistry) {
	s := fresh()
	regSave(t, s, "space_a", regOf("n-a", "Person", "Alice"))
	regSave(t, s, "space_b", regOf("n-b", "Person", "Alice"))
	regExpectFind(t, s, "space_a", "Person", []string{"Alice"}, []string{"n-a"}, "space_a's Alice")
	regExpectFind(t, s, "space_b", "Person", []string{"Alice"}, []string{"n-b"}, "space_b's Alice")
	regExpectFind(t, s, "space_c", "Person", []string{"Alice"}, nil, "space_c has no Alice")
	if ids := regIDs(regList(t, s, "space_a")); fmt.Sprint(ids) != "[n-a]" {
		t.Errorf("List(space_a) = %s; want [n-a]", confShow(ids))
	}
	regConflict(t, s, "space_b", "space_b's Alice is n-b", regOf("n-a", "Person", "Alice"))
}

func regTypeInKey(t suiteT, fresh func() reference.EntityRegistry) {
	s := fresh()
	regSave(t, s, "space_a", regOf("n-person", "Person", "Jordan"), regOf("n-country", "Country", "Jordan"))
	regExpectFind(t, s, "space_a", "Person", []string{"Jordan"}, []string{"n-person"}, "Person Jordan")
	regExpectFind(t, s, "space_a", "Country", []string{"Jordan"}, []string{"n-country"}, "Country Jordan")
	regConflict(t, s, "space_a", "type matching is normalised: PERSON is Person", regOf("n-person-2", "PERSON", "jordan"))
}

// regModelStore is the model of an EntityRegistry: the name index and the
// names of each node, per space.
type regModelStore struct {
	s     reference.EntityRegistry
	names map[[3]string]string          // space, normalised type, normalised name -> node
	nodes map[[2]string]map[string]bool // space, node -> normalised names
}

func regModel(t suiteT, fresh func() reference.EntityRegistry) {
	prop := confModelProp(t, func() *regModelStore {
		return &regModelStore{s: fresh(), names: map[[3]string]string{}, nodes: map[[2]string]map[string]bool{}}
	}, regModelPick)
	confCheckProp(t, "EntityRegistry commands", prop, 40, 30)
}

var regModelNames = []string{"Alice", " ALICE", "Bob", "bob  ", "Jordan", "Carol", "ｃａｒｏｌ"}

func regModelPick(r *rand.Rand) *confStep[*regModelStore] {
	space := confOneOf(r, "space_a", "space_b")
	switch k := r.Intn(10); {
	case k < 5:
		var regs []reference.EntityRegistration
		for i := 1 + r.Intn(3); i > 0; i-- {
			typ, node := "Person", confOneOf(r, "p1", "p2", "p3")
			if r.Intn(3) == 0 {
				typ, node = confOneOf(r, "Country", "COUNTRY"), confOneOf(r, "c1", "c2")
			}
			g := regOf(node, typ, confOneOf(r, regModelNames...))
			for j := r.Intn(2); j > 0; j-- {
				g.Aliases = append(g.Aliases, confOneOf(r, regModelNames...))
			}
			regs = append(regs, g)
		}
		return &confStep[*regModelStore]{fmt.Sprintf("SaveAll(%s, %s)", space, confShow(regs)), func(m *regModelStore) string { return m.save(space, regs) }}
	case k < 7:
		typ := confOneOf(r, "Person", "person", "Country")
		names := []string{confOneOf(r, regModelNames...), confOneOf(r, regModelNames...)}
		return &confStep[*regModelStore]{fmt.Sprintf("FindMatches(%s, %s, %q)", space, typ, names), func(m *regModelStore) string { return m.find(space, typ, names) }}
	case k < 8:
		var qs []reference.EntityQuery
		for i := 1 + r.Intn(3); i > 0; i-- {
			qs = append(qs, reference.EntityQuery{Type: confOneOf(r, "Person", "person", "Country"), Names: []string{confOneOf(r, regModelNames...), confOneOf(r, regModelNames...)}})
		}
		return &confStep[*regModelStore]{fmt.Sprintf("MatchNodeIDs(%s, %+v)", space, qs), func(m *regModelStore) string { return m.match(space, qs) }}
	default:
		return &confStep[*regModelStore]{fmt.Sprintf("List(%s)", space), func(m *regModelStore) string { return m.list(space) }}
	}
}

func (m *regModelStore) save(space string, regs []reference.EntityRegistration) string {
	batch := map[[3]string]string{}
	conflict := false
	for _, g := range regs {
		for _, n := range g.Names() {
			k := [3]string{space, reference.Normalize(g.Type), reference.Normalize(n)}
			if id, ok := m.names[k]; ok && id != g.NodeID {
				conflict = true
			}
			if id, ok := batch[k]; ok && id != g.NodeID {
				conflict = true
			}
			batch[k] = g.NodeID
		}
	}
	err := m.s.SaveAll(confCtx, space, regs)
	if conflict {
		if !errors.Is(err, reference.ErrRegistryConflict) {
			return confMismatch("SaveAll of a conflicting batch", "ErrRegistryConflict", err)
		}
		return m.list(space)
	}
	if err != nil {
		return confMismatch("SaveAll", "nil", err)
	}
	for k, id := range batch {
		m.names[k] = id
		nk := [2]string{space, id}
		if m.nodes[nk] == nil {
			m.nodes[nk] = map[string]bool{}
		}
		m.nodes[nk][k[2]] = true
	}
	return m.list(space)
}

func (m *regModelStore) view(space, id string) string {
	var names []string
	for n := range m.nodes[[2]string{space, id}] {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprintf("%s%q", id, names)
}

func (m *regModelStore) got(l []reference.RegisteredEntity) []string {
	var out []string
	for _, e := range l {
		names := append([]string(nil), e.Names...)
		sort.Strings(names)
		out = append(out, fmt.Sprintf("%s%q", e.NodeID, names))
	}
	sort.Strings(out)
	return out
}

func (m *regModelStore) find(space, typ string, names []string) string {
	seen := map[string]bool{}
	var want []string
	for _, n := range names {
		if id, ok := m.names[[3]string{space, reference.Normalize(typ), reference.Normalize(n)}]; ok && !seen[id] {
			seen[id] = true
			want = append(want, m.view(space, id))
		}
	}
	sort.Strings(want)
	l, err := m.s.FindMatches(confCtx, space, typ, names)
	if got := m.got(l); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		return confMismatch(fmt.Sprintf("FindMatches(%s, %s, %q)", space, typ, names), want, fmt.Sprintf("%q, %v", got, err))
	}
	return ""
}

// match checks reference.MatchNodeIDs: the registry's BatchMatcher when it
// has one (it must agree with FindMatches), FindMatches otherwise.
func (m *regModelStore) match(space string, qs []reference.EntityQuery) string {
	var want [][]string
	for _, q := range qs {
		ids := []string{}
		for _, n := range q.Names {
			if id, ok := m.names[[3]string{space, reference.Normalize(q.Type), reference.Normalize(n)}]; ok && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		want = append(want, ids)
	}
	got, err := reference.MatchNodeIDs(confCtx, m.s, space, qs)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		return confMismatch(fmt.Sprintf("MatchNodeIDs(%s, %+v)", space, qs), want, fmt.Sprintf("%q, %v", got, err))
	}
	return ""
}

func (m *regModelStore) list(space string) string {
	var want []string
	for k := range m.nodes {
		if k[0] == space {
			want = append(want, m.view(space, k[1]))
		}
	}
	sort.Strings(want)
	l, err := m.s.List(confCtx, space)
	if got := m.got(l); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		return confMismatch(fmt.Sprintf("List(%s)", space), want, fmt.Sprintf("%q, %v", got, err))
	}
	return ""
}
