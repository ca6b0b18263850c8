package history

// What says what the harness observed in a Seen record.
type What string

// The observations. The harness records them itself, at the boundary of
// the system under test (the worker before it calls the service, the model
// it owns, and thin wrappers around the stores the service writes to), so
// that the invariants judge the service against what was intended and what
// really reached the stores, not against the service's own bookkeeping.
const (
	// SeenIntent: the worker is about to ask the service for Do on Doc
	// (an ingest of content ContentHash, or a retraction; Op when the
	// caller names it) while the document's current revision is Base; or
	// to start a System B thread (Thread, Owner: one logical save).
	SeenIntent What = "intent"
	// SeenModel: the harness's model answered for Op about Doc and
	// content ContentHash; the document's revision was Base when it was
	// asked (the revision the plan is made against).
	SeenModel What = "model"
	// SeenFreeze: OperationStore.CreateIfAbsent for Op (Doc) returned
	// Created; Plan is the checker's own digest of the plan's whole
	// business content and Items the digests of its node and edge upserts;
	// Base is the document's revision at that moment.
	SeenFreeze What = "freeze"
	// SeenCommit: DocumentStateStore.CompareAndSet committed Op's state of
	// Doc, replacing revision Expected by Revision (Status, ContentHash).
	SeenCommit What = "commit"
	// SeenGraph: GraphWriter.Apply under Op succeeded; Items are the
	// digests of its node and edge upserts, Deleted counts its deletes.
	SeenGraph What = "graph"
	// SeenClaim: OperationStore.Claim of Op for Holder at Now until Until
	// returned Granted.
	SeenClaim What = "claim"
	// SeenUnclaim: Holder released its claim on Op (Granted: it held it).
	SeenUnclaim What = "unclaim"
	// SeenMark: OperationStore.CompareAndSet recorded that Op failed for
	// good: its failure reason took the pending dead-letter mark, or its
	// disposition became DEAD_LETTER, for the first time.
	SeenMark What = "mark"
	// SeenSave: PlanStore.Save for Thread (owner Owner, key Op) returned
	// row ID, or Err.
	SeenSave What = "save"
	// SeenDeadHolder: LockProvider.TryAcquire on Doc was refused at Now
	// by Holder's lease (fencing Token, the expiry the provider reported
	// in Until) although Holder had stopped at Stopped (its process
	// ended, as the supervisor saw it, or it stalled at a paused
	// failpoint and had not gone on); TTL is the lease TTL of the case.
	// The worker stopped waiting for that lease there.
	SeenDeadHolder What = "dead-holder"
)

// Observation is one thing the harness saw; which fields are set depends
// on What.
type Observation struct {
	What        What     `json:"what"`
	Do          string   `json:"do,omitempty"`
	Op          string   `json:"op,omitempty"`
	Doc         string   `json:"doc,omitempty"`
	ContentHash string   `json:"hash,omitempty"`
	Base        int64    `json:"base,omitempty"`
	Plan        string   `json:"plan,omitempty"`
	Items       []string `json:"items,omitempty"`
	Deleted     int      `json:"deleted,omitempty"`
	Created     bool     `json:"created,omitempty"`
	Expected    int64    `json:"expected,omitempty"`
	Revision    int64    `json:"rev,omitempty"`
	Status      string   `json:"status,omitempty"`
	Holder      string   `json:"holder,omitempty"`
	Granted     bool     `json:"granted,omitempty"`
	Now         int64    `json:"now,omitempty"`
	Until       int64    `json:"until,omitempty"`
	Thread      string   `json:"thread,omitempty"`
	Owner       string   `json:"owner,omitempty"`
	ID          int64    `json:"id,omitempty"`
	Err         string   `json:"err,omitempty"`
	Token       int64    `json:"token,omitempty"`
	Stopped     int64    `json:"stopped,omitempty"`
	TTL         int64    `json:"ttl,omitempty"`
}

// Observations returns the Seen records' observations in history order,
// each with the worker that made it.
func (h Log) Observations() []WorkerObservation {
	n := 0
	for _, r := range h {
		if r.Kind == Seen && r.Obs != nil {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]WorkerObservation, 0, n)
	for i, r := range h {
		if r.Kind == Seen && r.Obs != nil {
			out = append(out, WorkerObservation{Worker: r.Worker, Index: i, Observation: *r.Obs})
		}
	}
	return out
}

// WorkerObservation is an observation with the worker that made it and
// its position in the history.
type WorkerObservation struct {
	Worker string
	Index  int
	Observation
}
