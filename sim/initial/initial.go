// Package initial holds the state a scenario starts from: operations at
// any stage with their frozen plans, document states and version
// histories, registry entries, leases and graph nodes and edges of one
// space, as a real store held them. Read takes it from a backend (what
// `crashmatrix snapshot` writes), Validate checks it against the
// protocol's own rules, Load puts it into a backend before a run's steps,
// and Redact replaces business text in it deterministically.
package initial

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

// State is the stored state of one space at one moment. Every time in it
// (updatedAt, claim and lease expiries, committedAt) is an absolute unix
// millisecond as the source store held it; At is when it was read. Load
// moves every time by the same amount, so what was 5 s before At is 5 s
// before the run's clock when the steps start.
type State struct {
	// Space is the source space; Load renames it to the run's space.
	Space string `yaml:"space" json:"space"`
	// At is when the state was read (unix milliseconds).
	At         int64       `yaml:"at" json:"at"`
	Operations []Operation `yaml:"operations,omitempty" json:"operations,omitempty"`
	Documents  []Document  `yaml:"documents,omitempty" json:"documents,omitempty"`
	Registry   []Entity    `yaml:"registry,omitempty" json:"registry,omitempty"`
	Leases     []Lease     `yaml:"leases,omitempty" json:"leases,omitempty"`
	Graph      Graph       `yaml:"graph,omitempty" json:"graph,omitzero"`
}

// Operation is one stored operation and its frozen plan.
type Operation struct {
	ID               string `yaml:"id" json:"id"`
	Document         string `yaml:"document" json:"document"`
	ExpectedRevision int64  `yaml:"expectedRevision" json:"expectedRevision"`
	// Fingerprint is the stored planFingerprint; it must be the plan's
	// (reference.Fingerprint).
	Fingerprint   string                `yaml:"fingerprint" json:"fingerprint"`
	Stage         reference.Stage       `yaml:"stage" json:"stage"`
	UpdatedAt     int64                 `yaml:"updatedAt" json:"updatedAt"`
	Attempts      int                   `yaml:"attempts,omitempty" json:"attempts,omitempty"`
	FailureReason string                `yaml:"failureReason,omitempty" json:"failureReason,omitempty"`
	Disposition   reference.Disposition `yaml:"disposition,omitempty" json:"disposition,omitempty"`
	SupersededBy  string                `yaml:"supersededBy,omitempty" json:"supersededBy,omitempty"`
	// Claim is the recovery claim, if a holder's name is stored.
	Claim *Claim         `yaml:"claim,omitempty" json:"claim,omitempty"`
	Plan  reference.Plan `yaml:"plan" json:"plan"`
}

// Claim is an operation's recovery claim.
type Claim struct {
	Holder    string `yaml:"holder" json:"holder"`
	ExpiresAt int64  `yaml:"expiresAt" json:"expiresAt"`
}

// Document is one document's current state (nil when it has none) and
// version history (ascending revisions).
type Document struct {
	ID       string                    `yaml:"id" json:"id"`
	Current  *reference.DocumentState  `yaml:"current,omitempty" json:"current,omitempty"`
	Versions []reference.DocumentState `yaml:"versions,omitempty" json:"versions,omitempty"`
}

// Entity is one registry entry: its names are the normalised names bound
// to the node (the canonical name's among them).
type Entity struct {
	NodeID        string            `yaml:"nodeId" json:"nodeId"`
	Type          string            `yaml:"type" json:"type"`
	CanonicalName string            `yaml:"canonicalName" json:"canonicalName"`
	Names         []string          `yaml:"names,omitempty" json:"names,omitempty"`
	Properties    map[string]string `yaml:"properties,omitempty" json:"properties,omitempty"`
}

// Lease is one document lease: a holder with a fencing token and an
// expiry, or (Holder empty) a released lease that keeps its last token.
type Lease struct {
	Document  string `yaml:"document" json:"document"`
	Holder    string `yaml:"holder,omitempty" json:"holder,omitempty"`
	Token     int64  `yaml:"token" json:"token"`
	ExpiresAt int64  `yaml:"expiresAt,omitempty" json:"expiresAt,omitempty"`
}

// Graph is a space's stored nodes and edges.
type Graph struct {
	Nodes []reference.Node `yaml:"nodes,omitempty" json:"nodes,omitempty"`
	Edges []reference.Edge `yaml:"edges,omitempty" json:"edges,omitempty"`
}

// Empty reports whether the state holds nothing at all.
func (s *State) Empty() bool {
	return s == nil || len(s.Operations) == 0 && len(s.Documents) == 0 && len(s.Registry) == 0 &&
		len(s.Leases) == 0 && len(s.Graph.Nodes) == 0 && len(s.Graph.Edges) == 0
}

// Unfinished returns the ids of the operations recovery still has to
// finish (not COMPLETED, no disposition), in order.
func (s *State) Unfinished() []string {
	var out []string
	for _, op := range s.Operations {
		if op.Stage != reference.Completed && op.Disposition == reference.Active {
			out = append(out, op.ID)
		}
	}
	return out
}

// Problem is one way a state breaks the protocol's rules. Path is the
// field path inside the state (operations[2].plan.nextState.revision).
type Problem struct {
	Path string
	Msg  string
}

func (p Problem) Error() string { return p.Path + ": " + p.Msg }

func idx(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// Validate checks the state against the protocol's own rules: what a
// store that follows them can hold. A state that breaks an invariant
// (edges no ACTIVE document supports, a stuck operation, a gap in a
// version history) is valid: replaying it must show the violation. A state
// no correct store can hold (a plan that does not hash to its stored
// fingerprint, an illegal stage, a name bound to two nodes, an edge
// without its endpoints) is not: it is reported, never fixed up.
func (s *State) Validate() []Problem {
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	if strings.TrimSpace(s.Space) == "" {
		add("space", "required (the source space)")
	}
	if s.At <= 0 {
		add("at", "required: when the state was read, in unix milliseconds")
	}
	docs := map[string]int{}
	for i, d := range s.Documents {
		p := idx("documents", i)
		if keyed(docs, i, p+".id", d.ID, "document %q is already listed at documents[%d]", add) {
			s.validateDocument(d, p, add)
		}
	}
	ops := map[string]int{}
	for i, op := range s.Operations {
		p := idx("operations", i)
		if keyed(ops, i, p+".id", op.ID, "operationId %q is already used by operations[%d] (operationIds are globally unique)", add) {
			s.validateOperation(op, p, add)
		}
	}
	for i, op := range s.Operations {
		if op.SupersededBy != "" {
			if _, ok := ops[op.SupersededBy]; !ok {
				add(idx("operations", i)+".supersededBy", "names operation %q, which the state does not hold", op.SupersededBy)
			}
		}
	}
	s.validateRegistry(add)
	leases := map[string]int{}
	for i, l := range s.Leases {
		p := idx("leases", i)
		if strings.TrimSpace(l.Document) == "" {
			add(p+".document", "required")
		} else if j, dup := leases[l.Document]; dup {
			add(p+".document", "document %q already has a lease at leases[%d] (one lease row per document)", l.Document, j)
		} else {
			leases[l.Document] = i
		}
		if l.Token < 1 {
			add(p+".token", "fencing token %d: tokens start at 1", l.Token)
		}
		if l.Holder == "" && l.ExpiresAt != 0 {
			add(p+".expiresAt", "a released lease (no holder) has no expiry")
		}
		if l.Holder != "" && l.ExpiresAt <= 0 {
			add(p+".expiresAt", "required for a held lease")
		}
	}
	nodes := map[string]int{}
	for i, n := range s.Graph.Nodes {
		p := idx("graph.nodes", i)
		if keyed(nodes, i, p+".id", n.ID, "node %q is already listed at graph.nodes[%d]", add) && strings.TrimSpace(n.Label) == "" {
			add(p+".label", "required")
		}
	}
	edges := map[reference.EdgeKey]int{}
	for i, e := range s.Graph.Edges {
		p := idx("graph.edges", i)
		if j, dup := edges[e.Key]; dup {
			add(p+".key", "edge %s is already listed at graph.edges[%d]", e.Key, j)
		}
		edges[e.Key] = i
		if strings.TrimSpace(e.Key.Type) == "" {
			add(p+".key.type", "required")
		}
		for _, end := range []struct{ name, id string }{{"source", e.Key.Source}, {"target", e.Key.Target}} {
			if _, ok := nodes[end.id]; !ok {
				add(p+".key."+end.name, "node %q is not in graph.nodes (a graph writer never stores an edge without its endpoints)", end.id)
			}
		}
	}
	return ps
}

func (s *State) validateDocument(d Document, p string, add adder) {
	checkState := func(st reference.DocumentState, sp string) {
		if st.Space != s.Space {
			add(sp+".space", "space %q differs from the state's space %q", st.Space, s.Space)
		}
		if st.DocumentID != d.ID {
			add(sp+".documentId", "documentId %q differs from the document's id %q", st.DocumentID, d.ID)
		}
		if st.Revision < 1 {
			add(sp+".revision", "a committed revision is at least 1, got %d", st.Revision)
		}
		if strings.TrimSpace(st.OperationID) == "" {
			add(sp+".operationId", "required: the operation that committed it")
		}
		if st.Status != reference.DocActive && st.Status != reference.DocRetracted {
			add(sp+".status", "unknown status %q (want ACTIVE or RETRACTED)", st.Status)
		}
	}
	if d.Current != nil {
		checkState(*d.Current, p+".current")
	}
	for i, v := range d.Versions {
		vp := idx(p+".versions", i)
		checkState(v, vp)
		if i > 0 && v.Revision <= d.Versions[i-1].Revision {
			add(vp+".revision", "revision %d after revision %d: a version history is stored in ascending revisions, each once", v.Revision, d.Versions[i-1].Revision)
		}
	}
}

func (s *State) validateOperation(op Operation, p string, add adder) {
	if strings.TrimSpace(op.Document) == "" {
		add(p+".document", "required")
	}
	if !op.Stage.Valid() {
		add(p+".stage", "unknown stage %q (want one of %s)", op.Stage, stageNames())
	}
	switch op.Disposition {
	case reference.Active, reference.DeadLetter, reference.Abandoned:
	default:
		add(p+".disposition", "unknown disposition %q (want DEAD_LETTER, ABANDONED or nothing)", op.Disposition)
	}
	if op.SupersededBy != "" && op.Disposition != reference.Abandoned {
		add(p+".supersededBy", "only an ABANDONED operation is superseded")
	}
	if op.Stage == reference.Completed && op.Disposition != reference.Active {
		add(p+".disposition", "a COMPLETED operation has no disposition (both are terminal)")
	}
	if op.Attempts < 0 {
		add(p+".attempts", "negative")
	}
	if op.UpdatedAt <= 0 {
		add(p+".updatedAt", "required (unix milliseconds)")
	} else if s.At > 0 && op.UpdatedAt > s.At {
		add(p+".updatedAt", "%d is after the state was read (at: %d)", op.UpdatedAt, s.At)
	}
	if op.Claim != nil && strings.TrimSpace(op.Claim.Holder) == "" {
		add(p+".claim.holder", "required")
	}
	pl := op.Plan
	pp := p + ".plan"
	if err := pl.Validate(); err != nil {
		add(pp, "%v", err)
	}
	if pl.OperationID != op.ID {
		add(pp+".operationId", "%q differs from the operation's id %q", pl.OperationID, op.ID)
	}
	if pl.Space != s.Space {
		add(pp+".space", "space %q differs from the state's space %q", pl.Space, s.Space)
	}
	if pl.DocumentID != op.Document {
		add(pp+".documentId", "%q differs from the operation's document %q", pl.DocumentID, op.Document)
	}
	if pl.ExpectedRevision() != op.ExpectedRevision {
		add(p+".expectedRevision", "%d, but the plan was made against revision %d (plan.previousState)", op.ExpectedRevision, pl.ExpectedRevision())
	}
	if fp := reference.Fingerprint(pl); op.Fingerprint != fp {
		add(p+".fingerprint", "the plan hashes to %s, not %q: a plan never changes under its operationId (I1); if the plan was edited on purpose, write the new fingerprint", fp, op.Fingerprint)
	}
}

func (s *State) validateRegistry(add adder) {
	owner := map[string]string{}
	ids := map[string]int{}
	for i, e := range s.Registry {
		p := idx("registry", i)
		if !keyed(ids, i, p+".nodeId", e.NodeID, "node %q is already registered at registry[%d]", add) {
			continue
		}
		if strings.TrimSpace(e.Type) == "" {
			add(p+".type", "required")
		}
		if strings.TrimSpace(e.CanonicalName) == "" {
			add(p+".canonicalName", "required")
		}
		if c := reference.Normalize(e.CanonicalName); !slices.Contains(e.Names, c) {
			add(p+".names", "does not hold the normalised canonical name %q", c)
		}
		for j, n := range e.Names {
			if reference.Normalize(n) != n {
				add(idx(p+".names", j), "%q is not normalised (%q)", n, reference.Normalize(n))
				continue
			}
			k := reference.Normalize(e.Type) + "/" + n
			if prev, ok := owner[k]; ok && prev != e.NodeID {
				add(idx(p+".names", j), "name %q of type %s is already bound to node %s: the registry's unique constraint allows one node per (type, name)", n, e.Type, prev)
			}
			owner[k] = e.NodeID
		}
	}
}

// adder reports a problem at a field path.
type adder func(path, format string, args ...any)

// keyed checks the key of the i-th item of a list: required, and unique
// (dup names the key and the index that has it first). It reports whether
// the key is there.
func keyed(seen map[string]int, i int, path, key, dup string, add adder) bool {
	if strings.TrimSpace(key) == "" {
		add(path, "required")
		return false
	}
	if j, ok := seen[key]; ok {
		add(path, dup, key, j)
	} else {
		seen[key] = i
	}
	return true
}

func stageNames() string {
	var out []string
	for _, st := range reference.Stages {
		out = append(out, string(st))
	}
	return strings.Join(out, ", ")
}

// Normalize puts the state in canonical order (operations by id,
// documents by id, registry by node, leases by document, nodes and edges
// by id) and empties that are nil, so that equal states compare equal.
func (s *State) Normalize() {
	sort.Slice(s.Operations, func(i, j int) bool { return s.Operations[i].ID < s.Operations[j].ID })
	sort.Slice(s.Documents, func(i, j int) bool { return s.Documents[i].ID < s.Documents[j].ID })
	sort.Slice(s.Registry, func(i, j int) bool { return s.Registry[i].NodeID < s.Registry[j].NodeID })
	sort.Slice(s.Leases, func(i, j int) bool { return s.Leases[i].Document < s.Leases[j].Document })
	sort.Slice(s.Graph.Nodes, func(i, j int) bool { return s.Graph.Nodes[i].ID < s.Graph.Nodes[j].ID })
	sort.Slice(s.Graph.Edges, func(i, j int) bool { return s.Graph.Edges[i].Key.Less(s.Graph.Edges[j].Key) })
	for i := range s.Registry {
		sort.Strings(s.Registry[i].Names)
		s.Registry[i].Properties = nilIfEmpty(s.Registry[i].Properties)
	}
	for i := range s.Graph.Nodes {
		s.Graph.Nodes[i].Properties = nilIfEmpty(s.Graph.Nodes[i].Properties)
	}
	for i := range s.Graph.Edges {
		s.Graph.Edges[i].Properties = nilIfEmpty(s.Graph.Edges[i].Properties)
	}
	for i := range s.Operations {
		s.Operations[i].Plan = normPlan(s.Operations[i].Plan)
	}
	for i := range s.Documents {
		d := &s.Documents[i]
		if d.Current != nil {
			c := normState(*d.Current)
			d.Current = &c
		}
		for j := range d.Versions {
			d.Versions[j] = normState(d.Versions[j])
		}
		if len(d.Versions) == 0 {
			d.Versions = nil
		}
	}
}

func nilIfEmpty[M ~map[K]V, K comparable, V any](m M) M {
	if len(m) == 0 {
		return nil
	}
	return m
}

func nilIfNone[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

func normState(st reference.DocumentState) reference.DocumentState {
	st.FactSources = nilIfNone(st.FactSources)
	st.NodeIDs = nilIfNone(st.NodeIDs)
	return st
}

func normPlan(p reference.Plan) reference.Plan {
	p.Options.Attributes = nilIfEmpty(p.Options.Attributes)
	m := &p.Mutation
	m.DeleteNodes, m.DeleteEdges = nilIfNone(m.DeleteNodes), nilIfNone(m.DeleteEdges)
	m.UpsertNodes, m.UpsertEdges = nilIfNone(m.UpsertNodes), nilIfNone(m.UpsertEdges)
	for i := range m.UpsertNodes {
		m.UpsertNodes[i].Properties = nilIfEmpty(m.UpsertNodes[i].Properties)
	}
	for i := range m.UpsertEdges {
		m.UpsertEdges[i].Properties = nilIfEmpty(m.UpsertEdges[i].Properties)
	}
	if p.PreviousState != nil {
		s := normState(*p.PreviousState)
		p.PreviousState = &s
	}
	if p.NextState != nil {
		s := normState(*p.NextState)
		p.NextState = &s
	}
	p.StaleEdges = nilIfNone(p.StaleEdges)
	p.Registrations = nilIfNone(p.Registrations)
	for i := range p.Registrations {
		p.Registrations[i].Aliases = nilIfNone(p.Registrations[i].Aliases)
		p.Registrations[i].Properties = nilIfEmpty(p.Registrations[i].Properties)
	}
	return p
}
