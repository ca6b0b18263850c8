package initial

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/crashmatrix/crashmatrix/reference"
)

// Redact replaces the business text of the state and keeps its keys and
// shapes: property values, entity names and document contents become
// "v-<hash>", "n-<hash>" and a comment line; ids (spaces, documents,
// operations, nodes, edge keys), property names, stages, revisions,
// counters and times stay. The same text always becomes the same
// replacement (a keyed SHA-256: salt, then the text), so a name the
// registry and a plan share stays shared, and each plan's fingerprint is
// recomputed over the redacted plan. A redacted plan's content no longer
// parses into entities: a plan that loses a revision race and is planned
// anew from it yields an empty extraction.
func Redact(s *State, salt string) *State {
	r := redactor{salt: salt}
	out := *s
	out.Operations = make([]Operation, len(s.Operations))
	for i, op := range s.Operations {
		op.Plan = r.plan(op.Plan)
		op.Fingerprint = reference.Fingerprint(op.Plan)
		out.Operations[i] = op
	}
	out.Documents = make([]Document, len(s.Documents))
	for i, d := range s.Documents {
		if d.Current != nil {
			c := *d.Current
			d.Current = &c
		}
		d.Versions = append([]reference.DocumentState(nil), d.Versions...)
		out.Documents[i] = d
	}
	out.Registry = make([]Entity, len(s.Registry))
	for i, e := range s.Registry {
		e.CanonicalName, e.Names, e.Properties = r.name(e.CanonicalName), r.names(e.Names), r.props(e.Properties)
		out.Registry[i] = e
	}
	out.Graph.Nodes = make([]reference.Node, len(s.Graph.Nodes))
	for i, n := range s.Graph.Nodes {
		n.Properties = r.props(n.Properties)
		out.Graph.Nodes[i] = n
	}
	out.Graph.Edges = make([]reference.Edge, len(s.Graph.Edges))
	for i, e := range s.Graph.Edges {
		e.Properties = r.props(e.Properties)
		out.Graph.Edges[i] = e
	}
	out.Leases = append([]Lease(nil), s.Leases...)
	out.Normalize()
	return &out
}

type redactor struct{ salt string }

func (r redactor) hash(kind, s string) string {
	sum := sha256.Sum256([]byte(r.salt + "\x00" + kind + "\x00" + s))
	return hex.EncodeToString(sum[:8])
}

// name redacts an entity name: the normalised form decides the
// replacement, which is its own normal form, so the registry's normalised
// names and a plan's canonical names stay consistent.
func (r redactor) name(s string) string { return "n-" + r.hash("name", reference.Normalize(s)) }

func (r redactor) names(ns []string) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = r.name(n)
	}
	return out
}

func (r redactor) value(s string) string { return "v-" + r.hash("value", s) }

func (r redactor) props(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = r.value(v)
	}
	return out
}

func (r redactor) plan(p reference.Plan) reference.Plan {
	p.Options.Attributes = r.props(p.Options.Attributes)
	m := p.Mutation
	m.UpsertNodes = append([]reference.NodeUpsert(nil), m.UpsertNodes...)
	for i := range m.UpsertNodes {
		m.UpsertNodes[i].Properties = r.props(m.UpsertNodes[i].Properties)
	}
	m.UpsertEdges = append([]reference.EdgeUpsert(nil), m.UpsertEdges...)
	for i := range m.UpsertEdges {
		m.UpsertEdges[i].Properties = r.props(m.UpsertEdges[i].Properties)
	}
	p.Mutation = m
	regs := make([]reference.EntityRegistration, len(p.Registrations))
	for i, reg := range p.Registrations {
		reg.CanonicalName, reg.Aliases, reg.Properties = r.name(reg.CanonicalName), r.names(reg.Aliases), r.props(reg.Properties)
		regs[i] = reg
	}
	p.Registrations = regs
	if p.Content != "" {
		p.Content = "# redacted " + r.hash("content", p.Content) + "\n"
	}
	return normPlan(p)
}
