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
	"sync"
)

// Fingerprint is the planFingerprint of a plan: SHA-256 over a canonical,
// length-framed encoding of the operationId and all business content. It is
// independent of map and set ordering and of runtime timestamps
// (CommittedAt). 64 lowercase hex characters.
func Fingerprint(p Plan) string {
	e := fpPool.Get().(*fpEncoder)
	e.buf = e.buf[:0]
	defer fpPool.Put(e)
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
	return e.sum()
}

// fpEncoder frames values into a buffer that is hashed once at the end.
type fpEncoder struct{ buf []byte }

var fpPool = sync.Pool{New: func() any { return &fpEncoder{buf: make([]byte, 0, 4096)} }}

func (e *fpEncoder) frame(s string) {
	e.buf = strconv.AppendInt(e.buf, int64(len(s)), 10)
	e.buf = append(e.buf, ':')
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, 0)
}

func (e *fpEncoder) sum() string {
	sum := sha256.Sum256(e.buf)
	return hex.EncodeToString(sum[:])
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
	b := appendPlan(nil, &p)
	// What is stored is read back (on resume, by the checks): the decoded
	// form of these bytes is p. Its fingerprint is computed on the first
	// read, not here: the writer has just computed it for the record.
	planMemo.put(b, p.Clone(), "")
	return b, nil
}

// DecodePlan restores a stored plan and checks it against the fingerprint
// stored with its operation. A truncated or corrupted payload gives
// ErrCorruptPlan; a plan that does not hash to want gives ErrFingerprint.
//
// Decoding is a pure function of the payload, so recently decoded payloads
// are remembered (decoded, validated and hashed once) and each caller gets
// its own deep copy.
func DecodePlan(payload []byte, want string) (Plan, error) {
	p, fp, ok := planMemo.get(payload)
	if !ok {
		var err error
		if p, err = decodePlan(payload); err != nil {
			return Plan{}, err
		}
	}
	if fp == "" {
		fp = Fingerprint(p)
		planMemo.put(payload, p, fp)
	}
	if want != "" && fp != want {
		return Plan{}, fmt.Errorf("%w: operation %s stores %s, plan hashes to %s", ErrFingerprint, p.OperationID, want, fp)
	}
	return p.Clone(), nil
}

func decodePlan(payload []byte) (Plan, error) {
	var p Plan
	if readPlan(payload, &p) {
		if err := p.Validate(); err != nil {
			return Plan{}, fmt.Errorf("%w: %v", ErrCorruptPlan, err)
		}
		return p, nil
	}
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
	return p, nil
}

// EncodeState serialises a document state (JSON).
func EncodeState(s DocumentState) ([]byte, error) {
	b := appendState(nil, &s)
	stateMemo.put(b, s.Clone(), "")
	return b, nil
}

// DecodeState restores a document state (remembered like DecodePlan).
func DecodeState(b []byte) (DocumentState, error) {
	if s, _, ok := stateMemo.get(b); ok {
		return s.Clone(), nil
	}
	var s DocumentState
	if readStateBytes(b, &s) {
		stateMemo.put(b, s, "")
		return s.Clone(), nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("%w: document state: %v", ErrCorruptPlan, err)
	}
	stateMemo.put(b, s, "")
	return s.Clone(), nil
}

// memo remembers decoded payloads. It holds at most memoEntries entries and
// starts afresh when full: a run touches a few payloads many times.
type memo[T any] struct {
	mu sync.Mutex
	m  map[string]memoEntry[T]
}

type memoEntry[T any] struct {
	v  T
	fp string
}

const memoEntries = 2048

var (
	planMemo  memo[Plan]
	stateMemo memo[DocumentState]
)

func (c *memo[T]) get(payload []byte) (T, string, bool) {
	c.mu.Lock()
	e, ok := c.m[string(payload)]
	c.mu.Unlock()
	return e.v, e.fp, ok
}

func (c *memo[T]) put(payload []byte, v T, fp string) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= memoEntries {
		// Grown as entries come, not sized for memoEntries up front: a
		// worker process puts a few, and a map sized for 2048 (the plan
		// memo's first put allocated 110 KB) cost it fresh pages it
		// never filled.
		c.m = map[string]memoEntry[T]{}
	}
	c.m[string(payload)] = memoEntry[T]{v, fp}
	c.mu.Unlock()
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
