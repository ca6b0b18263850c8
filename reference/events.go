package reference

// Event is one observation of the service, for the harness's history.
type Event struct {
	Kind        string `json:"kind"`
	OperationID string `json:"op,omitempty"`
	Space       string `json:"space,omitempty"`
	DocumentID  string `json:"doc,omitempty"`
	From        Stage  `json:"from,omitempty"`
	To          Stage  `json:"to,omitempty"`
	Revision    int64  `json:"rev,omitempty"`
	Expected    int64  `json:"expected,omitempty"`
	Token       int64  `json:"token,omitempty"`
	Holder      string `json:"holder,omitempty"`
	ExpiresAt   int64  `json:"expiresAt,omitempty"`
	Detail      string `json:"detail,omitempty"`
	// Batch is what one graph batch wrote (EvGraphBatch).
	Batch *Mutation `json:"batch,omitempty"`
	At    int64     `json:"at"`
}

// Event kinds.
const (
	EvInvoke       = "invoke"        // an ingest, retract or resume call starts
	EvModelCall    = "model-call"    // the model was called (Detail: call ordinal)
	EvPrepared     = "prepared"      // createIfAbsent stored a new operation
	EvStage        = "stage"         // a stage CAS succeeded (From -> To)
	EvGraphWritten = "graph-written" // the writer confirmed the whole mutation (Detail: batches)
	EvGraphBatch   = "graph-batch"   // the writer confirmed one batch (Batch: what it wrote)
	EvVersion      = "version"       // the version history recorded a revision (Revision)
	EvStateCommit  = "state-commit"  // a revision CAS succeeded (Expected -> Revision)
	EvLeaseAcquire = "lease-acquire" // a lease was granted
	EvLeaseRenew   = "lease-renew"   // a lease was extended (ExpiresAt)
	EvLeaseLost    = "lease-lost"    // a stale holder was refused
	EvLeaseRelease = "lease-release" // a lease was released
	EvLeaseBroken  = "lease-broken"  // the lock provider broke its contract (Detail: how)
	// EvLeaseReleasing: a release is about to be sent. A process killed
	// between the store's release and EvLeaseRelease leaves only this one,
	// and the lease may be free (a random-instant kill found the gap).
	EvLeaseReleasing = "lease-releasing"
	EvDisposition    = "disposition" // dead letter or abandoned (Detail)
	EvOK             = "ok"          // the call returned (Detail: outcome)
	EvError          = "error"       // the call failed (Detail: error)
)

// Observer receives the service's events.
type Observer interface{ Observe(Event) }

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Observe implements Observer.
func (f ObserverFunc) Observe(e Event) { f(e) }

// Outcome says how an ingest, retract or resume call ended.
type Outcome string

// The outcomes.
const (
	OutcomeCompleted   Outcome = "COMPLETED"
	OutcomeNoOp        Outcome = "NO_OP"
	OutcomeAlreadyDone Outcome = "ALREADY_COMPLETED"
	OutcomeSuperseded  Outcome = "SUPERSEDED"
	OutcomeAbandoned   Outcome = "ABANDONED"
	OutcomeDeadLetter  Outcome = "DEAD_LETTER"
)

// Result is what a successful call returns.
type Result struct {
	OperationID  string
	Outcome      Outcome
	Revision     int64
	Writes       int
	SupersededBy string
}

// IngestRequest asks to ingest one document.
type IngestRequest struct {
	Space      string
	DocumentID string
	// OperationID names the business intent; derived from the content when
	// empty. A resubmission must reuse it.
	OperationID string
	Content     string
}
