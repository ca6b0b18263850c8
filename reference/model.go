package reference

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Disposition is the terminal verdict of an operation that will never reach
// COMPLETED.
type Disposition string

// The dispositions.
const (
	// Active: no terminal disposition yet.
	Active Disposition = ""
	// DeadLetter: a permanent error, or the retry budget ran out; a person
	// must look at it.
	DeadLetter Disposition = "DEAD_LETTER"
	// Abandoned: the plan lost a revision race and was replaced by a new
	// operation planned against the latest revision.
	Abandoned Disposition = "ABANDONED"
)

// Operation is the durable record of one business intent.
type Operation struct {
	OperationID      string      `json:"operationId"`
	Space            string      `json:"space"`
	DocumentID       string      `json:"documentId"`
	ExpectedRevision int64       `json:"expectedRevision"`
	PlanFingerprint  string      `json:"planFingerprint"`
	Stage            Stage       `json:"stage"`
	UpdatedAt        int64       `json:"updatedAt"` // unix milliseconds
	FailureReason    string      `json:"failureReason,omitempty"`
	Attempts         int         `json:"attempts"`
	Disposition      Disposition `json:"disposition,omitempty"`
	// SupersededBy names the operation that replaced an abandoned one.
	SupersededBy string `json:"supersededBy,omitempty"`
	// ClaimHolder and ClaimExpiresAt record the recovery claim.
	ClaimHolder    string `json:"claimHolder,omitempty"`
	ClaimExpiresAt int64  `json:"claimExpiresAt,omitempty"`
}

// Finished reports whether recovery has nothing left to do.
func (o Operation) Finished() bool { return o.Stage == Completed || o.Disposition != Active }

// SameIdentity reports whether two records describe the same operation and
// plan: id, space, document, expected revision and fingerprint.
func (o Operation) SameIdentity(p Operation) bool {
	return o.OperationID == p.OperationID && o.Space == p.Space && o.DocumentID == p.DocumentID &&
		o.ExpectedRevision == p.ExpectedRevision && o.PlanFingerprint == p.PlanFingerprint
}

// ValidateUpdate checks that next is a legal successor of cur: same
// identity; a legal stage transition (or the same stage); time not running
// backwards; attempts not decreasing; nothing changes after COMPLETED or a
// disposition. Every store calls it inside its compare-and-set.
func ValidateUpdate(cur, next Operation) error {
	if !cur.SameIdentity(next) {
		return fmt.Errorf("operation %s: %w: identity changed", cur.OperationID, ErrIdentityMismatch)
	}
	if !next.Stage.Valid() {
		return fmt.Errorf("operation %s: %w %q", cur.OperationID, ErrUnknownStage, next.Stage)
	}
	if cur.Stage == Completed || cur.Disposition != Active {
		return fmt.Errorf("operation %s: %w: %s/%s is terminal", cur.OperationID, ErrIllegalTransition, cur.Stage, cur.Disposition)
	}
	if next.Stage != cur.Stage && !cur.Stage.CanTransition(next.Stage) {
		return fmt.Errorf("operation %s: %w %s -> %s", cur.OperationID, ErrIllegalTransition, cur.Stage, next.Stage)
	}
	if next.UpdatedAt < cur.UpdatedAt {
		return fmt.Errorf("operation %s: %w: %d before %d", cur.OperationID, ErrTimeBackwards, next.UpdatedAt, cur.UpdatedAt)
	}
	if next.Attempts < cur.Attempts {
		return fmt.Errorf("operation %s: %w: attempts went down from %d to %d", cur.OperationID, ErrIllegalTransition, cur.Attempts, next.Attempts)
	}
	switch next.Disposition {
	case Active, DeadLetter, Abandoned:
	default:
		return fmt.Errorf("operation %s: %w: unknown disposition %q", cur.OperationID, ErrIllegalTransition, next.Disposition)
	}
	return nil
}

// Advance returns o moved to stage to at time at, or an error for an
// illegal transition or time running backwards.
func (o Operation) Advance(to Stage, at int64, reason string) (Operation, error) {
	n := o
	n.Stage, n.UpdatedAt, n.FailureReason = to, at, reason
	if to == o.Stage {
		return o, fmt.Errorf("operation %s: %w %s -> %s", o.OperationID, ErrIllegalTransition, o.Stage, to)
	}
	if err := ValidateUpdate(o, n); err != nil {
		return o, err
	}
	return n, nil
}

// PlanKind says what a plan does.
type PlanKind string

// The plan kinds.
const (
	Ingestion  PlanKind = "INGESTION"
	Retraction PlanKind = "RETRACTION"
	NoOp       PlanKind = "NO_OP"
)

// DocStatus is the status of a committed document state.
type DocStatus string

// The document statuses.
const (
	DocActive    DocStatus = "ACTIVE"
	DocRetracted DocStatus = "RETRACTED"
)

// DocumentState is one committed revision of a document.
type DocumentState struct {
	Space                 string    `json:"space"`
	DocumentID            string    `json:"documentId"`
	Revision              int64     `json:"revision"`
	OperationID           string    `json:"operationId"`
	ContentHash           string    `json:"contentHash"`
	ExtractionFingerprint string    `json:"extractionFingerprint"`
	Status                DocStatus `json:"status"`
	// FactSources are the edges this revision supports.
	FactSources []EdgeKey `json:"factSources"`
	// NodeIDs are the entity nodes this revision mentions.
	NodeIDs     []string `json:"nodeIds"`
	CommittedAt int64    `json:"committedAt"` // runtime timestamp, not fingerprinted
}

// Supports reports whether the state lists k among its fact sources.
func (s DocumentState) Supports(k EdgeKey) bool {
	for _, e := range s.FactSources {
		if e == k {
			return true
		}
	}
	return false
}

// NodeUpsert patches a node's properties, creating it if absent.
type NodeUpsert struct {
	ID         string            `json:"id"`
	Label      string            `json:"label"`
	Properties map[string]string `json:"properties,omitempty"`
}

// EdgeUpsert patches an edge's properties, creating it if absent; it never
// creates a missing endpoint.
type EdgeUpsert struct {
	Key        EdgeKey           `json:"key"`
	Properties map[string]string `json:"properties,omitempty"`
}

// Mutation is the graph change of one plan. Writers apply it in this order:
// delete nodes (detaching their edges), delete edges, upsert nodes, upsert
// edges.
type Mutation struct {
	OperationID string       `json:"operationId"`
	DeleteNodes []string     `json:"deleteNodes,omitempty"`
	DeleteEdges []EdgeKey    `json:"deleteEdges,omitempty"`
	UpsertNodes []NodeUpsert `json:"upsertNodes,omitempty"`
	UpsertEdges []EdgeUpsert `json:"upsertEdges,omitempty"`
}

// Empty reports whether the mutation changes nothing.
func (m Mutation) Empty() bool {
	return len(m.DeleteNodes) == 0 && len(m.DeleteEdges) == 0 && len(m.UpsertNodes) == 0 && len(m.UpsertEdges) == 0
}

// Size is the number of elementary changes.
func (m Mutation) Size() int {
	return len(m.DeleteNodes) + len(m.DeleteEdges) + len(m.UpsertNodes) + len(m.UpsertEdges)
}

// Batches splits the mutation into batches of at most n changes that,
// applied in order, equal the whole mutation (the phase order is kept).
func (m Mutation) Batches(n int) []Mutation {
	if n <= 0 || m.Size() <= n {
		return []Mutation{m}
	}
	var out []Mutation
	cur := Mutation{OperationID: m.OperationID}
	flush := func() {
		if !cur.Empty() {
			out = append(out, cur)
		}
		cur = Mutation{OperationID: m.OperationID}
	}
	for _, x := range m.DeleteNodes {
		cur.DeleteNodes = append(cur.DeleteNodes, x)
		if cur.Size() == n {
			flush()
		}
	}
	for _, x := range m.DeleteEdges {
		cur.DeleteEdges = append(cur.DeleteEdges, x)
		if cur.Size() == n {
			flush()
		}
	}
	for _, x := range m.UpsertNodes {
		cur.UpsertNodes = append(cur.UpsertNodes, x)
		if cur.Size() == n {
			flush()
		}
	}
	for _, x := range m.UpsertEdges {
		cur.UpsertEdges = append(cur.UpsertEdges, x)
		if cur.Size() == n {
			flush()
		}
	}
	flush()
	return out
}

// EntityRegistration binds names of one entity to its node id.
type EntityRegistration struct {
	NodeID        string            `json:"nodeId"`
	Type          string            `json:"type"`
	CanonicalName string            `json:"canonicalName"`
	Aliases       []string          `json:"aliases,omitempty"`
	Properties    map[string]string `json:"properties,omitempty"`
}

// Names returns the canonical name and the aliases.
func (r EntityRegistration) Names() []string {
	return append([]string{r.CanonicalName}, r.Aliases...)
}

// GraphOptions routes a plan to a graph.
type GraphOptions struct {
	Space      string            `json:"space"`
	ReadOnly   bool              `json:"readOnly,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Plan is the frozen outcome of one model call for one document at one
// expected revision. Recovery executes it; it never asks the model again.
type Plan struct {
	Kind          PlanKind             `json:"kind"`
	OperationID   string               `json:"operationId"`
	Space         string               `json:"space"`
	DocumentID    string               `json:"documentId"`
	Options       GraphOptions         `json:"options"`
	Mutation      Mutation             `json:"mutation"`
	PreviousState *DocumentState       `json:"previousState,omitempty"`
	NextState     *DocumentState       `json:"nextState,omitempty"`
	StaleEdges    []EdgeKey            `json:"staleEdges,omitempty"`
	Registrations []EntityRegistration `json:"registrations,omitempty"`
	// Content is the document as submitted, kept so that a plan that loses a
	// revision race can be planned anew without the caller.
	Content string `json:"content,omitempty"`
	// ExtractionCall is the ordinal of the model call that produced the
	// plan for this operationId (an audit field: recovery never calls the
	// model again, so no later call may exist).
	ExtractionCall int `json:"extractionCall,omitempty"`
}

// ExpectedRevision is the document revision the plan was made against.
func (p Plan) ExpectedRevision() int64 {
	if p.PreviousState == nil {
		return 0
	}
	return p.PreviousState.Revision
}

// Validate checks the plan's own consistency.
func (p Plan) Validate() error {
	var errs []string
	if strings.TrimSpace(p.OperationID) == "" {
		errs = append(errs, "operationId is blank")
	}
	if strings.TrimSpace(p.Space) == "" {
		errs = append(errs, "space is blank")
	}
	if strings.TrimSpace(p.DocumentID) == "" {
		errs = append(errs, "documentId is blank")
	}
	switch p.Kind {
	case Ingestion, Retraction, NoOp:
	default:
		errs = append(errs, fmt.Sprintf("kind %q is not INGESTION, RETRACTION or NO_OP", p.Kind))
	}
	if p.Mutation.OperationID != p.OperationID {
		errs = append(errs, fmt.Sprintf("mutation.operationId %q differs from operationId %q", p.Mutation.OperationID, p.OperationID))
	}
	if p.PreviousState != nil && p.PreviousState.Revision < 0 {
		errs = append(errs, fmt.Sprintf("previousState.revision %d is negative", p.PreviousState.Revision))
	}
	if p.Kind != NoOp {
		if p.NextState == nil {
			errs = append(errs, "nextState is missing")
		} else {
			n := p.NextState
			if n.Space != p.Space || n.DocumentID != p.DocumentID {
				errs = append(errs, fmt.Sprintf("nextState identity %s/%s differs from plan %s/%s", n.Space, n.DocumentID, p.Space, p.DocumentID))
			}
			if n.Revision != p.ExpectedRevision()+1 {
				errs = append(errs, fmt.Sprintf("nextState.revision %d is not expected revision %d + 1", n.Revision, p.ExpectedRevision()))
			}
			if n.OperationID != p.OperationID {
				errs = append(errs, fmt.Sprintf("nextState.operationId %q differs from operationId %q", n.OperationID, p.OperationID))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidPlan, strings.Join(errs, "; "))
	}
	return nil
}

// Node is a node as read back from a graph.
type Node struct {
	ID         string            `json:"id"`
	Label      string            `json:"label"`
	Properties map[string]string `json:"properties,omitempty"`
}

// Edge is an edge as read back from a graph.
type Edge struct {
	Key        EdgeKey           `json:"key"`
	Properties map[string]string `json:"properties,omitempty"`
}

// Graph is a space's whole graph, for checking convergence.
type Graph struct {
	Nodes map[string]Node  `json:"nodes"`
	Edges map[EdgeKey]Edge `json:"-"`
}

// NewGraph returns an empty graph.
func NewGraph() Graph { return Graph{Nodes: map[string]Node{}, Edges: map[EdgeKey]Edge{}} }

// Apply folds a mutation into the graph with writer semantics; it returns
// ErrMissingEndpoint (and changes nothing) if an edge upsert names a node
// that does not exist after the node phases.
func (g Graph) Apply(m Mutation) error {
	nodes := make(map[string]bool, len(g.Nodes))
	for id := range g.Nodes {
		nodes[id] = true
	}
	for _, id := range m.DeleteNodes {
		delete(nodes, id)
	}
	for _, n := range m.UpsertNodes {
		nodes[n.ID] = true
	}
	for _, e := range m.UpsertEdges {
		if !nodes[e.Key.Source] || !nodes[e.Key.Target] {
			return fmt.Errorf("edge %s: %w", e.Key, ErrMissingEndpoint)
		}
	}
	for _, id := range m.DeleteNodes {
		delete(g.Nodes, id)
		for k := range g.Edges {
			if k.Source == id || k.Target == id {
				delete(g.Edges, k)
			}
		}
	}
	for _, k := range m.DeleteEdges {
		delete(g.Edges, k)
	}
	for _, n := range m.UpsertNodes {
		cur, ok := g.Nodes[n.ID]
		if !ok {
			cur = Node{ID: n.ID, Label: n.Label, Properties: map[string]string{}}
		}
		if cur.Properties == nil {
			cur.Properties = map[string]string{}
		}
		for k, v := range n.Properties {
			cur.Properties[k] = v
		}
		g.Nodes[n.ID] = cur
	}
	for _, e := range m.UpsertEdges {
		cur, ok := g.Edges[e.Key]
		if !ok {
			cur = Edge{Key: e.Key, Properties: map[string]string{}}
		}
		if cur.Properties == nil {
			cur.Properties = map[string]string{}
		}
		for k, v := range e.Properties {
			cur.Properties[k] = v
		}
		g.Edges[e.Key] = cur
	}
	return nil
}

// SortedEdges returns the edge keys in portable-id order.
func (g Graph) SortedEdges() []EdgeKey {
	out := make([]EdgeKey, 0, len(g.Edges))
	for k := range g.Edges {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// SortedNodes returns the node ids in order.
func (g Graph) SortedNodes() []string {
	out := make([]string, 0, len(g.Nodes))
	for id := range g.Nodes {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Lease is a held per-document lock.
type Lease struct {
	Space      string `json:"space"`
	DocumentID string `json:"documentId"`
	Holder     string `json:"holder"`
	// Token is the fencing token: strictly increasing per document.
	Token     int64 `json:"token"`
	ExpiresAt int64 `json:"expiresAt"` // unix milliseconds
}

// RegisteredEntity is one entity as stored in the registry.
type RegisteredEntity struct {
	Space         string            `json:"space"`
	NodeID        string            `json:"nodeId"`
	Type          string            `json:"type"`
	CanonicalName string            `json:"canonicalName"`
	Names         []string          `json:"names"` // normalised names bound to NodeID
	Properties    map[string]string `json:"properties,omitempty"`
}

// Errors shared by the stores and the service. Stores wrap them with the
// operation and ids they concern; callers test with errors.Is.
var (
	ErrNotFound          = errors.New("not found")
	ErrIdentityMismatch  = errors.New("identity mismatch")
	ErrPlanConflict      = errors.New("operationId already bound to another plan")
	ErrInvalidPlan       = errors.New("invalid plan")
	ErrCorruptPlan       = errors.New("corrupt plan payload")
	ErrFingerprint       = errors.New("plan fingerprint does not match its plan")
	ErrInvalidRevision   = errors.New("invalid revision")
	ErrRegistryConflict  = errors.New("entity registry name is already assigned to another node")
	ErrMissingEndpoint   = errors.New("edge endpoint does not exist")
	ErrLeaseHeld         = errors.New("lease held by another holder")
	ErrLeaseLost         = errors.New("lease lost")
	ErrLockTimeout       = errors.New("timed out waiting for document lease")
	ErrLeaseContract     = errors.New("the lock provider broke the lease contract")
	ErrInvalidArgument   = errors.New("invalid argument")
	ErrNoPersistedPlan   = errors.New("operation has no persisted plan")
	ErrRevisionConflict  = errors.New("document revision changed concurrently")
	ErrOperationFinished = errors.New("operation already finished")
)

// CheckKey rejects a blank space or documentId with ErrInvalidArgument.
func CheckKey(space, documentID string) error {
	if strings.TrimSpace(space) == "" {
		return fmt.Errorf("%w: space is blank", ErrInvalidArgument)
	}
	if strings.TrimSpace(documentID) == "" {
		return fmt.Errorf("%w: documentId is blank", ErrInvalidArgument)
	}
	return nil
}
