package check

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

// The checker's own canonical encoding of plan content. It is written
// independently of reference.Fingerprint on purpose: a fingerprint that
// leaves out part of the business content would otherwise judge itself.
// Every field a person would call "the plan" is in it (the operationId and
// the model call's ordinal are not: they name the plan, they are not its
// content).

// PlanDigest returns a SHA-256 over the checker's canonical encoding of
// the plan's whole business content: kind, document, base revision, every
// node and edge upsert with all properties, every delete, the next state,
// the stale edges, the registrations and the document content.
func PlanDigest(p reference.Plan) string {
	// One buffer, quoted in place: the checker encodes every plan a run
	// freezes and stores, and this was a tenth of an in-process
	// exploration's CPU as strings built and thrown away.
	b := make([]byte, 0, 1024)
	field := func(k, v string) {
		b = append(b, k...)
		b = append(b, '=')
		b = appendQuote(b, v)
		b = append(b, '\n')
	}
	field("kind", string(p.Kind))
	field("space", p.Space)
	field("document", p.DocumentID)
	field("base", strconv.FormatInt(p.ExpectedRevision(), 10))
	field("content", p.Content)
	for _, it := range MutationItems(p.Mutation) {
		field("upsert", it)
	}
	for _, k := range sortedKeys(p.Mutation.DeleteEdges) {
		field("delete-edge", k)
	}
	nodes := append([]string(nil), p.Mutation.DeleteNodes...)
	sort.Strings(nodes)
	for _, n := range nodes {
		field("delete-node", n)
	}
	if n := p.NextState; n != nil {
		field("next.revision", strconv.FormatInt(n.Revision, 10))
		field("next.status", string(n.Status))
		field("next.contentHash", n.ContentHash)
		field("next.model", n.ExtractionFingerprint)
		for _, k := range sortedKeys(n.FactSources) {
			field("next.fact", k)
		}
		ids := append([]string(nil), n.NodeIDs...)
		sort.Strings(ids)
		for _, id := range ids {
			field("next.node", id)
		}
	}
	for _, k := range sortedKeys(p.StaleEdges) {
		field("stale", k)
	}
	regs := make([]string, 0, len(p.Registrations))
	for _, r := range p.Registrations {
		names := append([]string(nil), r.Aliases...)
		sort.Strings(names)
		regs = append(regs, r.NodeID+"\x1f"+r.Type+"\x1f"+r.CanonicalName+"\x1f"+strings.Join(names, "\x1e")+"\x1f"+props(r.Properties))
	}
	sort.Strings(regs)
	for _, r := range regs {
		field("registration", r)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// MutationItems returns the checker's encoding of each node and edge a
// mutation upserts, with every property, sorted: what a graph write under
// a plan may put into the graph.
func MutationItems(m reference.Mutation) []string {
	out := make([]string, 0, len(m.UpsertNodes)+len(m.UpsertEdges))
	for _, n := range m.UpsertNodes {
		out = append(out, "node "+n.ID+" :"+n.Label+" {"+props(n.Properties)+"}")
	}
	for _, e := range m.UpsertEdges {
		out = append(out, "edge "+e.Key.String()+" {"+props(e.Properties)+"}")
	}
	sort.Strings(out)
	return out
}

func props(m map[string]string) string {
	switch len(m) {
	case 0:
		return ""
	case 1:
		for k, v := range m {
			return string(appendQuote(append(appendQuote(make([]byte, 0, len(k)+len(v)+5), k), ':'), v))
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuote(b, k)
		b = append(b, ':')
		b = appendQuote(b, m[k])
	}
	return string(b)
}

func sortedKeys(ks []reference.EdgeKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.String()
	}
	sort.Strings(out)
	return out
}
