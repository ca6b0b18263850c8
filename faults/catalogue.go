// Package faults holds the catalogue of crash windows of the ingestion protocol
// and the fault actions crashmatrix can inject at each of them.
//
// Every window is a named failpoint placed immediately before one step of the
// protocol. A fault at a window acts on the step that follows it:
//
//   - crash:     the process dies (SIGKILL) before the step runs;
//   - error:     the step fails with a transient (retryable) error;
//   - permanent: the step fails with a permanent error (dead letter);
//   - unknown:   the step runs and commits, then the process dies before it
//     learns the outcome (the "unknown commit" window);
//   - pause:     the process stalls past its lease before the step, so another
//     worker takes over; when it wakes up it must be refused;
//   - recrash:   a crash, and the first recovery crashes at the same window
//     again (a crash during recovery);
//   - persistent: a permanent error at every hit, in every worker of the case
//     until faults stop (a schema or permission error does not go away on
//     retry, so only a dead letter ends it);
//   - split:     the lease is granted although another holder's lease is still
//     live (split brain: a GC pause or clock skew); the revision CAS, the
//     claim and the plan fingerprint must then keep the invariants alone;
//   - expire:    the store lets the lease expire at once while its holder
//     believes it for the whole TTL (early expiry).
//
// Three more kinds act on a database server instead of the worker (server
// backends only; the supervisor carries them out through sim/servers):
//
//   - server-crash: the server is killed with SIGKILL at the window,
//     restarted on the same data, and the worker goes on;
//   - ack-lost:     the next write to reach the server commits, its reply is
//     dropped and the connection cut (the client cannot know the outcome);
//   - conn-reset:   the connection of the next request is reset before the
//     request reaches the server.
//
// Three more act on a server while it lives on (opt-in: a run has them
// only when --kind names them, ServerOptInKinds):
//
//   - server-pause: the server is stopped (SIGSTOP, the whole container
//     frozen) at the window, the worker's next request goes out to it, the
//     case's clock moves past the lease, then the server resumes (SIGCONT)
//     while another worker takes the lease over;
//   - partition:    the worker's connections to the server are held silent
//     (nothing passes either way) past the lease while another worker
//     reaches the server and takes the lease over, then the partition
//     heals and the held request (the worker's commit) arrives;
//   - clock-jump:   the server's own clock (its now()) jumps forward, then
//     back, while the worker holds its lease (images with libfaketime).
//
// One more kind acts on the machine (process mode, embedded backends whose
// case data lives on the lazy file system of faults/lazyfs):
//
//   - power-loss: the worker dies at the window (SIGKILL) and so does every
//     other process of the case, then everything written and not synced
//     is thrown away (faults/lazyfs states the rule); recovery runs on what
//     is left. It applies wherever crash does.
//   - torn-write: the same, except that of each surviving file some 4 KiB
//     pages written and not synced survive whole and the others are lost
//     (lazyfs.FS.PowerLossTorn, seeded by the window).
//
// Three act on the disk of a live system (the same lazy file system; the
// worker goes on after the window, and the supervisor arms the error on
// the mount at that instant):
//
//   - fsync-error: the next fsync or fdatasync of a store file returns EIO
//     once, and what it had to write is dropped, as Linux drops it (a
//     later fsync succeeds; the data is gone at the next power loss);
//   - disk-full:   from the window on, writes, new files and the fsync of
//     un-synced data fail with ENOSPC, until the worker ends and space
//     comes back;
//   - slow-sync:   the next fsync makes its data durable, then takes longer
//     than the lease before it returns (on the harness clock).
//
// After the worker of an fsync-error or disk-full ends, the supervisor
// cuts the power of the mount: what a store acknowledged must be durable
// (I9).
//
// The names are failpoint paths, so they can be armed with
// EnableFailpoint or the GO_FAILPOINTS environment variable (in
// pingcap/failpoint's syntax, term return("action")) without any code
// rewriting.
package faults

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Point names one crash window (one failpoint).
type Point string

// Kind is a kind of fault injected at a Point.
type Kind string

// The fault kinds.
const (
	Crash     Kind = "crash"
	Transient Kind = "error"
	Permanent Kind = "permanent"
	Unknown   Kind = "unknown"
	Pause     Kind = "pause"
	// Recrash crashes at the window, then crashes the first recovery
	// attempt at the same window again (a crash during recovery).
	Recrash Kind = "recrash"
	// Persistent is a permanent error that fires at every hit; a case arms
	// it in every worker until faults stop.
	Persistent Kind = "persistent"
	// Split grants a lease another holder still holds (split brain).
	Split Kind = "split"
	// Expire grants a lease the store forgets at once (early expiry).
	Expire Kind = "expire"
	// ServerCrash kills the database server at the window (SIGKILL) and
	// restarts it on the same data.
	ServerCrash Kind = "server-crash"
	// AckLost lets the next write reach the server and commit, then drops
	// its reply and cuts the connection.
	AckLost Kind = "ack-lost"
	// ConnReset resets the connection of the next request before the
	// request reaches the server.
	ConnReset Kind = "conn-reset"
	// PowerLoss kills every process of the case at the window and drops
	// every write that was not synced (the lazy file system).
	PowerLoss Kind = "power-loss"
	// ServerPause stops the database server (SIGSTOP) past the lease, then
	// resumes it (SIGCONT).
	ServerPause Kind = "server-pause"
	// Partition holds the worker's connections to the server silent past
	// the lease, then heals them.
	Partition Kind = "partition"
	// ClockJump moves the database server's clock forward, then back.
	ClockJump Kind = "clock-jump"
	// TornWrite is a power loss that tears: of the files that survive,
	// each 4 KiB page written and not synced (each 512-byte sector with
	// Action.Tear TearSector, each smaller unit down to a byte with a
	// smaller Tear) is kept or lost whole, as the case's seed decides,
	// where PowerLoss loses them all (LazyFS's torn writes).
	TornWrite Kind = "torn-write"
	// FsyncError fails the next fsync of a store file with EIO and drops
	// what it had to write (lazyfs.FS.FailNextSync).
	FsyncError Kind = "fsync-error"
	// DiskFull fails writes and syncs with ENOSPC from the window until
	// the worker ends (lazyfs.FS.SetFull).
	DiskFull Kind = "disk-full"
	// SlowSync makes the next fsync of a store file last longer than the
	// lease (lazyfs.FS.SlowNextSync).
	SlowSync Kind = "slow-sync"
)

// DiskKinds are the kinds that act on the disk of a live system: errors
// and delays of the case's lazy file system, armed at a window.
var DiskKinds = []Kind{FsyncError, DiskFull, SlowSync}

// IsDisk reports whether k is a disk error or delay (DiskKinds).
func (k Kind) IsDisk() bool { return k == FsyncError || k == DiskFull || k == SlowSync }

// Kinds lists every worker-side fault kind in a stable order: the crash
// matrix of every backend.
var Kinds = []Kind{Crash, Transient, Permanent, Unknown, Pause, Recrash, Persistent, Split, Expire}

// IsLeaseFault reports whether k breaks the document lease (split brain or
// early expiry) instead of the step after its point.
func (k Kind) IsLeaseFault() bool { return k == Split || k == Expire }

// ServerKinds are the fault kinds that act on a database server; they
// apply at every window of a server backend whose servers may be faulted.
var ServerKinds = []Kind{ServerCrash, AckLost, ConnReset}

// ServerOptInKinds are the server faults a run has only when --kind names
// them: each holds a server or a connection for seconds of wall time, and
// server-pause and clock-jump need a container crashmatrix started.
var ServerOptInKinds = []Kind{ServerPause, Partition, ClockJump}

// Servers names the servers a server fault can target.
var Servers = []string{"postgres", "neo4j"}

// IsServer reports whether k acts on a database server.
func (k Kind) IsServer() bool {
	return k == ServerCrash || k == AckLost || k == ConnReset || slices.Contains(ServerOptInKinds, k)
}

// HoldsPastLease reports whether k keeps the worker's request from its
// server past the lease while another worker goes on (server-pause,
// partition, clock-jump): its case lets another worker run meanwhile.
func (k Kind) HoldsPastLease() bool { return slices.Contains(ServerOptInKinds, k) }

// IsPowerLoss reports whether k cuts the machine's power (a plain or a
// torn power loss).
func (k Kind) IsPowerLoss() bool { return k == PowerLoss || k == TornWrite }

// AllKinds lists every fault kind: the worker-side ones (Kinds), the
// server ones (ServerKinds, ServerOptInKinds), the power losses, then
// the disk errors (DiskKinds).
func AllKinds() []Kind {
	return append(append(append(append(slices.Clone(Kinds), ServerKinds...), ServerOptInKinds...), PowerLoss, TornWrite), DiskKinds...)
}

// ParseKind parses a fault kind name.
func ParseKind(s string) (Kind, error) {
	every := AllKinds()
	for _, k := range every {
		if string(k) == s {
			return k, nil
		}
	}
	names := make([]string, 0, len(every))
	for _, k := range every {
		names = append(names, string(k))
	}
	return "", fmt.Errorf("unknown fault kind %q (want one of %s)", s, strings.Join(names, ", "))
}

// The crash windows of System A (ingestion) and System B (plan save).
const (
	BeforeExtract            Point = "beforeExtract"
	BeforePrepare            Point = "beforePrepare"
	BeforeGraphWrite         Point = "beforeGraphWrite"
	BetweenGraphBatches      Point = "betweenGraphBatches"
	BeforeGraphApplied       Point = "beforeGraphApplied"
	BeforeRegistrySave       Point = "beforeRegistrySave"
	BeforeStateCommit        Point = "beforeStateCommit"
	BeforeRecordVersion      Point = "beforeRecordVersion"
	BeforeStateCommitted     Point = "beforeStateCommitted"
	BeforeCompleted          Point = "beforeCompleted"
	BeforeMarkFailed         Point = "beforeMarkFailed"
	BeforeDeadLetter         Point = "beforeDeadLetter"
	BeforeRetryPrepared      Point = "beforeRetryPrepared"
	BeforeLeaseCheck         Point = "beforeLeaseCheck"
	RecoveryBeforeClaim      Point = "recoveryBeforeClaim"
	RecoveryBeforeResume     Point = "recoveryBeforeResume"
	ConflictBeforeAbandon    Point = "conflictBeforeAbandon"
	ConflictBeforeReplan     Point = "conflictBeforeReplan"
	PlanSaveBeforeApprove    Point = "planSaveBeforeApprove"
	PlanSaveBeforeBusiness   Point = "planSaveBeforeBusinessCommit"
	PlanSaveBeforeCheckpoint Point = "planSaveBeforeCheckpoint"
	LeaseAcquire             Point = "leaseAcquire"
)

// System says which protocol a window belongs to.
type System string

// The two systems under test.
const (
	Ingestion System = "ingestion" // System A
	PlanSave  System = "plansave"  // System B
)

// Spec describes one crash window.
type Spec struct {
	Point  Point
	System System
	// Step is the protocol step that follows the window.
	Step string
	// Window is the crash window of protocol.md this point realises.
	Window string
	// Recovery is what recovery must do after a crash here.
	Recovery string
	// Kinds are the fault kinds that make sense at this window.
	Kinds []Kind
	// InRecovery marks windows that only recovery code passes through.
	InRecovery bool
}

var all = []Kind{Crash, Transient, Permanent, Unknown, Pause, Recrash, Persistent}

// Catalogue lists every failpoint of the reference implementation. A test
// checks that the code and this list agree.
var Catalogue = []Spec{
	{BeforeExtract, Ingestion, "call the model", "before PREPARED (no model answer yet)", "nothing to resume; the caller resubmits", []Kind{Crash, Transient, Permanent, Persistent}, false},
	{BeforePrepare, Ingestion, "persist operation + plan (createIfAbsent)", "before PREPARED (model answered, nothing durable)", "nothing to resume; the caller resubmits and a new plan is made", []Kind{Crash, Transient, Permanent, Unknown, Pause, Persistent}, false},
	{BeforeGraphWrite, Ingestion, "apply the mutation's first batch", "after PREPARED, before the graph write", "re-run the writer from the persisted plan", all, false},
	{BetweenGraphBatches, Ingestion, "apply the next mutation batch", "during the graph write (partial batches)", "re-run; upserts and deletes must be repeatable", all, false},
	{BeforeGraphApplied, Ingestion, "stage PREPARED -> GRAPH_APPLIED", "graph write succeeded, stage not advanced (the unknown window)", "re-apply the mutation idempotently and reconcile", all, false},
	{BeforeRegistrySave, Ingestion, "entity registry saveAll", "after GRAPH_APPLIED", "skip the writer; continue with registry and state commit", all, false},
	{BeforeStateCommit, Ingestion, "document revision compare-and-set", "after the registry write, before the state commit", "continue; registry writes are idempotent", all, false},
	{BeforeRecordVersion, Ingestion, "record the version history", "after the state commit, before the history", "see the state by operationId; fill in the history; advance stages only", all, false},
	{BeforeStateCommitted, Ingestion, "stage GRAPH_APPLIED -> STATE_COMMITTED", "after the state commit, before STATE_COMMITTED", "see the state by operationId; advance stages only", all, false},
	{BeforeCompleted, Ingestion, "stage STATE_COMMITTED -> COMPLETED", "after STATE_COMMITTED, before COMPLETED", "advance the stage only", all, false},
	{LeaseAcquire, Ingestion, "acquire the document lease", "a document lease is asked for (split brain, early expiry)", "the revision CAS, the claim and the plan fingerprint stop the holder whose lease was broken", []Kind{Crash, Split, Expire}, false},
	{BeforeMarkFailed, Ingestion, "record the failure (PREPARED -> FAILED after a writer error)", "a step failed, failure not yet recorded", "retry with the same plan", []Kind{Crash, Unknown}, false},
	{BeforeDeadLetter, Ingestion, "record the dead letter of an operation that failed for good", "failure recorded as a pending dead letter, graph effects reconciled, dead letter not yet recorded", "finish the dead letter: reconcile again, record it; the plan never runs again (a permanent error is not retried)", []Kind{Crash, Unknown}, false},
	{BeforeRetryPrepared, Ingestion, "stage FAILED -> PREPARED on retry", "FAILED recorded, retry not started", "retry with the same plan", []Kind{Crash, Transient, Unknown}, true},
	{BeforeLeaseCheck, Ingestion, "check the document lease before the state commit", "holding a lease that may have expired", "a stale holder is refused; the new holder finishes", []Kind{Crash, Pause}, false},
	{RecoveryBeforeClaim, Ingestion, "claim an unfinished operation for recovery", "recovery found work, not yet claimed", "another round claims it", []Kind{Crash, Transient, Unknown}, true},
	{RecoveryBeforeResume, Ingestion, "resume a claimed operation", "claimed, not yet resumed", "the claim expires; another instance resumes", []Kind{Crash, Transient, Pause}, true},
	{ConflictBeforeAbandon, Ingestion, "abandon an operation that lost its revision race", "revision conflict detected, old plan not yet abandoned", "re-detect the conflict; abandon; plan anew", []Kind{Crash, Unknown}, false},
	{ConflictBeforeReplan, Ingestion, "plan anew against the latest revision", "old plan abandoned, new plan not yet made", "plan anew from the latest state; reconcile stale edges", []Kind{Crash, Unknown}, false},
	{PlanSaveBeforeApprove, PlanSave, "write the approval checkpoint", "approval given, not checkpointed", "ask again; nothing saved yet", []Kind{Crash, Unknown}, false},
	{PlanSaveBeforeBusiness, PlanSave, "save the plan row (business commit)", "approved, plan row not yet saved", "run save with the same operation_id", []Kind{Crash, Transient, Unknown}, false},
	{PlanSaveBeforeCheckpoint, PlanSave, "record save as done in the checkpoint", "business commit done, checkpoint not written", "run save again; the unique key returns the first row id", []Kind{Crash, Transient, Unknown}, false},
}

// Lookup returns the spec of a point: a catalogue window, or the
// StoreCall or StoreCommit pseudo-point.
func Lookup(p Point) (Spec, bool) {
	switch p {
	case StoreCall:
		return StoreCallSpec, true
	case StoreCommit:
		return StoreCommitSpec, true
	}
	for _, s := range Catalogue {
		if s.Point == p {
			return s, true
		}
	}
	return Spec{}, false
}

// ParsePoint validates a point name against the catalogue.
func ParsePoint(s string) (Point, error) {
	if _, ok := Lookup(Point(s)); ok {
		return Point(s), nil
	}
	names := make([]string, 0, len(Catalogue)+1)
	for _, c := range Catalogue {
		names = append(names, string(c.Point))
	}
	names = append(names, string(StoreCall), string(StoreCommit))
	sort.Strings(names)
	return "", fmt.Errorf("unknown failpoint %q (known: %v)", s, names)
}

// AppliesServer reports whether a server fault of kind k against server is
// meaningful at this window: PostgreSQL (every store) at every window,
// Neo4j (the graph only) at the windows of System A. The faults that hold
// a request past the lease (HoldsPastLease) mean something where a holder
// may stall past its lease (the pause kind applies) and, on Neo4j, where
// the next step writes the graph; clock-jump only on PostgreSQL, where
// the leases are.
func (s Spec) AppliesServer(k Kind, server string) bool {
	switch {
	case !k.IsServer():
		return false
	case k.HoldsPastLease():
		if !s.Applies(Pause) || s.System != Ingestion {
			return false
		}
		if server == "neo4j" {
			return k != ClockJump && (s.Point == BeforeGraphWrite || s.Point == BetweenGraphBatches)
		}
		return server == "postgres"
	case server == "neo4j":
		return s.System == Ingestion
	default:
		return server == "postgres"
	}
}

// Applies reports whether kind k is meaningful at this window; a power
// loss, torn or not, and a disk error are wherever a crash is (the step
// after the window is one the worker would die before).
func (s Spec) Applies(k Kind) bool {
	if k.IsPowerLoss() || k.IsDisk() {
		k = Crash
	}
	for _, x := range s.Kinds {
		if x == k {
			return true
		}
	}
	return false
}
