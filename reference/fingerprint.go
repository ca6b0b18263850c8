package reference

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// Fingerprint is the planFingerprint of a plan: SHA-256 over a canonical,
// length-framed encoding of the operationId and all business content. It is
// independent of map and set ordering and of runtime timestamps
// (CommittedAt). 64 lowercase hex characters.
func Fingerprint(p Plan) string {
	var e fpEncoder
	e.str("kind", string(p.Kind))
	e.str("operationId", p.OperationID)
	e.str("space", p.Space)
	e.str("documentId", p.DocumentID)
	e.str("options.space", p.Options.Space)
	e.str("options.readOnly", strconv.FormatBool(p.Options.ReadOnly))
	e.props("options.attributes", p.Options.Attributes)
	e.str("expectedRevision", strconv.FormatInt(p.ExpectedRevision(), 10))

	m := p.Mutation
	e.str("mutation.operationId", m.OperationID)
	e.strs("mutation.deleteNodes", sortedCopy(m.DeleteNodes))
	e.edges("mutation.deleteEdges", m.DeleteEdges)
	nodes := append([]NodeUpsert(nil), m.UpsertNodes...)
	sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	e.count("mutation.upsertNodes", len(nodes))
	for _, n := range nodes {
		e.str("node.id", n.ID)
		e.str("node.label", n.Label)
		e.props("node.properties", n.Properties)
	}
	edges := append([]EdgeUpsert(nil), m.UpsertEdges...)
	sort.SliceStable(edges, func(i, j int) bool { return edges[i].Key.Less(edges[j].Key) })
	e.count("mutation.upsertEdges", len(edges))
	for _, x := range edges {
		e.str("edge.key", x.Key.PortableID())
		e.props("edge.properties", x.Properties)
	}
	e.state("nextState", p.NextState)
	e.edges("staleEdges", p.StaleEdges)
	regs := append([]EntityRegistration(nil), p.Registrations...)
	sort.SliceStable(regs, func(i, j int) bool { return regs[i].NodeID < regs[j].NodeID })
	e.count("registrations", len(regs))
	for _, r := range regs {
		e.str("reg.nodeId", r.NodeID)
		e.str("reg.type", r.Type)
		e.str("reg.canonicalName", r.CanonicalName)
		e.strs("reg.aliases", sortedCopy(r.Aliases))
		e.props("reg.properties", r.Properties)
	}
	e.str("content", p.Content)
	e.count("extractionCall", p.ExtractionCall)
	sum := e.h.Sum(nil)
	return hex.EncodeToString(sum)
}

type fpEncoder struct{ h hashWriter }

type hashWriter interface {
	io.Writer
	Sum([]byte) []byte
}

func (e *fpEncoder) frame(s string) {
	if e.h == nil {
		e.h = sha256.New()
	}
	fmt.Fprintf(e.h, "%d:", len(s))
	io.WriteString(e.h, s)
	e.h.Write([]byte{0})
}

func (e *fpEncoder) str(name, v string) { e.frame(name); e.frame(v) }

func (e *fpEncoder) count(name string, n int) { e.str(name, strconv.Itoa(n)) }

func (e *fpEncoder) strs(name string, vs []string) {
	e.count(name, len(vs))
	for _, v := range vs {
		e.frame(v)
	}
}

func (e *fpEncoder) props(name string, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.count(name, len(keys))
	for _, k := range keys {
		e.frame(k)
		e.frame(m[k])
	}
}

func (e *fpEncoder) edges(name string, ks []EdgeKey) {
	ids := make([]string, len(ks))
	for i, k := range ks {
		ids[i] = k.PortableID()
	}
	sort.Strings(ids)
	e.strs(name, ids)
}

func (e *fpEncoder) state(name string, s *DocumentState) {
	if s == nil {
		e.str(name, "<null>")
		return
	}
	e.str(name, "present")
	e.str("state.space", s.Space)
	e.str("state.documentId", s.DocumentID)
	e.str("state.revision", strconv.FormatInt(s.Revision, 10))
	e.str("state.operationId", s.OperationID)
	e.str("state.contentHash", s.ContentHash)
	e.str("state.extractionFingerprint", s.ExtractionFingerprint)
	e.str("state.status", string(s.Status))
	e.edges("state.factSources", s.FactSources)
	e.strs("state.nodeIds", sortedCopy(s.NodeIDs))
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// EncodePlan serialises a plan for an operation store (JSON).
func EncodePlan(p Plan) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(p)
}

// DecodePlan restores a stored plan and checks it against the fingerprint
// stored with its operation. A truncated or corrupted payload gives
// ErrCorruptPlan; a plan that does not hash to want gives ErrFingerprint.
func DecodePlan(payload []byte, want string) (Plan, error) {
	var p Plan
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Plan{}, fmt.Errorf("%w: %v (%d bytes)", ErrCorruptPlan, err, len(payload))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Plan{}, fmt.Errorf("%w: trailing data after the plan", ErrCorruptPlan)
	}
	if err := p.Validate(); err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrCorruptPlan, err)
	}
	if got := Fingerprint(p); want != "" && got != want {
		return Plan{}, fmt.Errorf("%w: operation %s stores %s, plan hashes to %s", ErrFingerprint, p.OperationID, want, got)
	}
	return p, nil
}

// EncodeState serialises a document state (JSON).
func EncodeState(s DocumentState) ([]byte, error) { return json.Marshal(s) }

// DecodeState restores a document state.
func DecodeState(b []byte) (DocumentState, error) {
	var s DocumentState
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("%w: document state: %v", ErrCorruptPlan, err)
	}
	return s, nil
}

// NewOperation builds the PREPARED operation record of a plan.
func NewOperation(p Plan, now int64) Operation {
	return Operation{
		OperationID:      p.OperationID,
		Space:            p.Space,
		DocumentID:       p.DocumentID,
		ExpectedRevision: p.ExpectedRevision(),
		PlanFingerprint:  Fingerprint(p),
		Stage:            Prepared,
		UpdatedAt:        now,
	}
}

// CheckNewOperation validates an operation + plan pair before createIfAbsent:
// the plan is valid, the identities agree, and the fingerprint matches.
func CheckNewOperation(op Operation, p Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if op.OperationID != p.OperationID || op.Space != p.Space || op.DocumentID != p.DocumentID {
		return fmt.Errorf("%w: operation %s/%s/%s vs plan %s/%s/%s", ErrIdentityMismatch,
			op.OperationID, op.Space, op.DocumentID, p.OperationID, p.Space, p.DocumentID)
	}
	if op.ExpectedRevision != p.ExpectedRevision() {
		return fmt.Errorf("%w: operation %s expects revision %d, plan %d", ErrIdentityMismatch, op.OperationID, op.ExpectedRevision, p.ExpectedRevision())
	}
	if op.ExpectedRevision < 0 {
		return fmt.Errorf("%w: operation %s expects negative revision %d", ErrInvalidRevision, op.OperationID, op.ExpectedRevision)
	}
	if fp := Fingerprint(p); op.PlanFingerprint != fp {
		return fmt.Errorf("%w: operation %s carries %q, plan hashes to %s", ErrFingerprint, op.OperationID, op.PlanFingerprint, fp)
	}
	if op.Stage != Prepared {
		return fmt.Errorf("%w: a new operation starts PREPARED, not %s", ErrIllegalTransition, op.Stage)
	}
	return nil
}
