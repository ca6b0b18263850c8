package catalogue

import (
	"fmt"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/initial"
)

// Step is one worker process of a case.
type Step struct {
	// Worker names the process in the history ("fault", "recover", ...).
	Worker  string   `json:"worker" yaml:"worker"`
	Actions []Action `json:"actions" yaml:"actions"`
	// Arms are the faults armed in this worker: point -> action
	// (faults.ParseAction syntax, e.g. faults.On(faults.Crash, 1), "pause:300@1").
	Arms faults.Arms `json:"arms,omitempty" yaml:"arms,omitempty"`
	// Background starts the worker and moves on to the next step as soon
	// as it reports its first failpoint hit (or exits); the case waits for
	// it at the end. This is how a paused worker overlaps another.
	Background bool `json:"background,omitempty" yaml:"background,omitempty"`
	// Resubmit prepends the unfinished actions of the named earlier
	// workers (what their callers would resubmit) to this step's actions.
	Resubmit []string `json:"resubmit,omitempty" yaml:"resubmit,omitempty"`
	// ExpectHit lists points that must fire in this worker for the case to
	// count as exercised.
	ExpectHit []faults.Point `json:"expectHit,omitempty" yaml:"expectHit,omitempty"`
	// ContinueOnError keeps the worker going after a failed action.
	ContinueOnError bool `json:"continueOnError,omitempty" yaml:"continueOnError,omitempty"`
	// Kill, when set, SIGKILLs the worker at an instant of its run instead
	// of at a failpoint (a random-instant kill); it must fire for the case
	// to count as exercised.
	Kill *RandomKill `json:"kill,omitempty" yaml:"kill,omitempty"`
	// Durable, when set, has the supervisor count the worker's durable
	// file operations per store call on the case's lazy mount, and kill
	// the worker's process group right after the one it names
	// (sim/casefaults/durable.go); it must fire for the case to count as exercised.
	Durable *DurableKill `json:"durable,omitempty" yaml:"durable,omitempty"`
	// Meanwhile, on a step that stalls (a pause fault), is what another
	// worker must do while this one stalls, for the case to mean what it
	// says: the history must show it between the stall's start and the
	// stalled worker's next record, or the case is not exercised.
	Meanwhile *Meanwhile `json:"meanwhile,omitempty" yaml:"meanwhile,omitempty"`
}

// Meanwhile is a step of another worker that must land inside a stall.
type Meanwhile struct {
	Worker string `json:"worker" yaml:"worker"`
	Does   Deed   `json:"does" yaml:"does"`
}

// Deed is what a worker is seen doing in the history.
type Deed string

// The deeds a Meanwhile can require.
const (
	// DeedLease: the worker was granted a lease.
	DeedLease Deed = "lease"
	// DeedFreeze: the worker created an operation with its plan.
	DeedFreeze Deed = "freeze"
	// DeedGraph: a graph write of the worker reached the graph.
	DeedGraph Deed = "graph"
	// DeedCommit: a state commit of the worker reached the state store
	// (seen at the store, or, for a service whose state store is its
	// own and whose calls the harness does not see, reported by its
	// state-commit event: a revision CAS that succeeded).
	DeedCommit Deed = "commit"
)

// Deeds are the deeds a Meanwhile can require, in protocol order.
var Deeds = []Deed{DeedLease, DeedFreeze, DeedGraph, DeedCommit}

// Did says whether record r is worker w doing d.
func (d Deed) Did(r history.Record, w string) bool {
	if r.Worker != w {
		return false
	}
	switch d {
	case DeedLease:
		return r.Kind == history.Event && r.Event != nil && r.Event.Kind == reference.EvLeaseAcquire
	case DeedFreeze:
		return r.Kind == history.Seen && r.Obs != nil && r.Obs.What == history.SeenFreeze && r.Obs.Created
	case DeedGraph:
		return r.Kind == history.Seen && r.Obs != nil && r.Obs.What == history.SeenGraph
	case DeedCommit:
		return r.Kind == history.Seen && r.Obs != nil && r.Obs.What == history.SeenCommit ||
			r.Kind == history.Event && r.Event != nil && r.Event.Kind == reference.EvStateCommit
	}
	return false
}

// Case is one cell of the crash matrix, or one named scenario.
type Case struct {
	// ID is unique within a run and names the case's namespace.
	ID     string        `json:"id"`
	System faults.System `json:"system"`
	// Point and Kind locate the case in the matrix (Point is empty for a
	// case class).
	Point faults.Point `json:"point,omitempty"`
	Kind  faults.Kind  `json:"kind,omitempty"`
	// Server is the server a server fault targets (Kind.IsServer()).
	Server string `json:"server,omitempty"`
	// Class names a case class (duplicate-delivery, ...), for rows beside
	// the windows.
	Class       string `json:"class,omitempty"`
	Description string `json:"description"`
	Steps       []Step `json:"steps"`
	// TTLMillis is the lease TTL the case's pause lengths were computed
	// for (0: they are absolute); ForTTL rescales them to another TTL.
	TTLMillis int64 `json:"ttlMillis,omitempty"`
	// Store marks a store-declared window's case (Point is the store's
	// point name).
	Store bool `json:"store,omitempty"`
	// Initial, when set, is loaded into the case's space before the
	// first step (a scenario's initial block).
	Initial *initial.State `json:"initial,omitempty"`
}

// Label is the case's row x column in the matrix.
func (c Case) Label() string {
	if c.Class == RandomKillClass {
		return c.ID
	}
	if c.Class != "" {
		return c.Class
	}
	return string(c.Point) + " x " + string(c.Column())
}

// Column is the case's column in the matrix: its fault kind, and for a
// server fault the server ("server-crash:neo4j").
func (c Case) Column() faults.Kind {
	if c.Server != "" {
		return c.Kind + ":" + faults.Kind(c.Server)
	}
	return c.Kind
}

// The standard corpus: four documents' worth of changes that pass every
// window of System A (three graph batches, a shared entity, a shared edge, a
// stale edge, a retraction).
const (
	DocD1v1 = "Person:Alice {role=author}\nPerson:Alice -KNOWS-> Person:Bob\nPerson:Bob -WORKS_AT-> Org:Acme\n"
	DocD2   = "Person:Bob -WORKS_AT-> Org:Acme\nPerson:Carol -KNOWS-> Person:Bob\n"
	DocD1v2 = "Person:Alice {role=editor}\nPerson:Alice -KNOWS-> Person:Carol\n"
	DocD3a  = "Person:Dan -KNOWS-> Person:Eve\nPerson:Eve -WORKS_AT-> Org:Initech\n"
	DocD3b  = "Person:Dan -LIKES-> Person:Eve\n"
	DocD4   = "Person:Frank {team=graph} -MANAGES-> Person:Grace\nPerson:Grace -WORKS_AT-> Org:Globex\n"
	// DocVariantsA and DocVariantsB name Alice and Acme in other case:
	// one entity each, whatever the spelling (class entity-variants).
	DocVariantsA = "Person:Alice -WORKS_AT-> Org:Acme\n"
	DocVariantsB = "Person:ALICE -KNOWS-> Person:Bob\nPerson:Bob -WORKS_AT-> Org:ACME\n"
)

// StandardScript is what the fault worker of a window case does. The
// first document (d4) is never changed again, so whatever a fault did to it
// is still visible when the invariants are checked.
func StandardScript() []Action {
	return []Action{
		{Do: "ingest", Doc: "d4", Content: DocD4},
		{Do: "ingest", Doc: "d1", Content: DocD1v1},
		{Do: "ingest", Doc: "d2", Content: DocD2},
		{Do: "ingest", Doc: "d1", Content: DocD1v2},
		{Do: "retract", Doc: "d2"},
	}
}

// PlanSaveScript is what the fault worker of a System B case does.
func PlanSaveScript() []Action {
	return []Action{
		{Do: "plansave-start", Thread: "t1", Owner: "alice", Question: "Which route to Bergen?", Minutes: 30},
		{Do: "plansave-invoke", Thread: "t1", Approve: true},
	}
}

func RecoverStep(name string, arms faults.Arms) Step {
	return Step{Worker: name, Actions: []Action{{Do: "recover", Rounds: 10}}, Arms: arms, ContinueOnError: true}
}

func QuiesceStep(system faults.System, resubmit ...string) Step {
	acts := []Action{{Do: "recover", Rounds: 10}}
	if system == faults.PlanSave {
		acts = []Action{{Do: "plansave-invoke", Thread: "t1", Approve: true}, {Do: "plansave-conflict", Thread: "t1"}}
	}
	return Step{Worker: "quiesce", Actions: acts, Resubmit: resubmit, ContinueOnError: true}
}

// WindowCase builds the case for one window and fault kind; ok is false
// when the kind does not apply at the window.
func (b Builder) WindowCase(p faults.Point, k faults.Kind) (Case, bool) {
	spec, found := faults.Lookup(p)
	if !found {
		return Case{}, false
	}
	return b.windowCase(spec, k)
}

// windowCase builds the case of a catalogue or store-declared window.
func (b Builder) windowCase(spec faults.Spec, k faults.Kind) (Case, bool) {
	p := spec.Point
	if !spec.Applies(k) {
		return Case{}, false
	}
	arm := faults.On(k, 1)
	if k == faults.Pause {
		arm = faults.PauseOn(b.LongPause(), 1)
	}
	if k == faults.Persistent {
		arm = faults.On(faults.Persistent, 0) // every hit
	}
	if k == faults.Recrash {
		arm = faults.On(faults.Crash, 1)
	}
	c := Case{ID: caseID(strings.ReplaceAll(string(p), "/", "-"), string(k)), System: spec.System, Point: p, Kind: k, TTLMillis: b.ttl,
		Description: fmt.Sprintf("%s at %q (%s); recovery must: %s", k, spec.Step, spec.Window, spec.Recovery)}
	fault := Step{Worker: "fault", Arms: faults.Arms{}, ExpectHit: []faults.Point{p}}
	var recovery []Step
	switch {
	case spec.System == faults.PlanSave:
		fault.Actions = PlanSaveScript()
		recovery = append(recovery, Step{Worker: "recover", Actions: []Action{{Do: "plansave-invoke", Thread: "t1", Approve: true}}, ContinueOnError: true})
	case p == faults.BeforeMarkFailed:
		fault.Actions = StandardScript()
		fault.Arms[faults.BeforeGraphWrite] = faults.On(faults.Transient, 1)
	case p == faults.BeforeDeadLetter:
		// A state commit fails for good: the failure is recorded, the
		// graph effects reconciled, then the dead letter recorded.
		fault.Actions = StandardScript()
		fault.Arms[faults.BeforeStateCommit] = faults.On(faults.Permanent, 1)
	case p == faults.BeforeRetryPrepared || p == faults.RecoveryBeforeClaim || p == faults.RecoveryBeforeResume || (faults.IsStorePoint(p) && spec.InRecovery):
		// Leave work for recovery, then fault inside recovery.
		setup := faults.On(faults.Transient, 1)
		if p != faults.BeforeRetryPrepared {
			setup = faults.On(faults.Crash, 1)
		}
		c.Steps = append(c.Steps, Step{Worker: "setup", Actions: StandardScript(), Arms: faults.Arms{faults.BeforeGraphWrite: setup}, ExpectHit: []faults.Point{faults.BeforeGraphWrite}})
		fault.Actions = []Action{{Do: "recover", Rounds: 3}}
		fault.ContinueOnError = true
	case p == faults.LeaseAcquire && k.IsLeaseFault():
		return b.leaseFaultCase(c, k), true
	case p == faults.ConflictBeforeReplan || p == faults.ConflictBeforeAbandon:
		// A plan for d3 is persisted and written, then a competing
		// revision of d3 commits first; recovery finds the conflict.
		c.Steps = append(c.Steps,
			Step{Worker: "setup", Actions: []Action{{Do: "ingest", Doc: "d3", Content: DocD3a}}, Arms: faults.Arms{faults.BeforeGraphApplied: faults.On(faults.Crash, 1)}, ExpectHit: []faults.Point{faults.BeforeGraphApplied}},
			Step{Worker: "competitor", Actions: []Action{{Do: "ingest", Doc: "d3", Content: DocD3b}}})
		fault.Actions = []Action{{Do: "recover", Rounds: 3}}
		fault.ContinueOnError = true
	default:
		fault.Actions = StandardScript()
	}
	fault.Arms[p] = arm
	if k == faults.Pause {
		fault.Background = true
	}
	c.Steps = append(c.Steps, fault)
	if k == faults.Recrash {
		again := RecoverStep(RecrashWorker, faults.Arms{p: faults.On(faults.Crash, 1)})
		again.ExpectHit = []faults.Point{p}
		if spec.System == faults.PlanSave {
			again.Actions = []Action{{Do: "plansave-invoke", Thread: "t1", Approve: true}}
		} else if faults.IsStorePoint(p) && !spec.InRecovery {
			// Recovery alone may never call the store method again (a
			// crash before the operation existed leaves it nothing to
			// do): the re-run is the caller's resubmission, then recovery.
			again.Resubmit = []string{"fault"}
		}
		c.Steps = append(c.Steps, again)
	}
	if len(recovery) == 0 {
		recovery = append(recovery, RecoverStep("recover", nil))
	}
	if k == faults.Persistent {
		// The fault persists across retries and restarts until faults
		// stop: only a dead letter ends it.
		for i := range recovery {
			recovery[i].Arms = faults.Arms{p: arm}
		}
	}
	c.Steps = append(c.Steps, recovery...)
	resub := []string{"fault"}
	if c.Steps[0].Worker == "setup" {
		resub = []string{"setup", "fault"}
	}
	c.Steps = append(c.Steps, QuiesceStep(spec.System, resub...))
	return c, true
}

// LongPause is a stall well past the lease: twice the TTL and a little.
func (b Builder) LongPause() time.Duration {
	return time.Duration(2*b.ttl+100) * time.Millisecond
}

// ShortPause is a stall well inside the lease: half the TTL.
func (b Builder) ShortPause() time.Duration {
	return time.Duration(b.ttl/2) * time.Millisecond
}

// LeaseBoundary names a pause length relative to the lease TTL.
type LeaseBoundary struct {
	Name string
	// Num/Den of the TTL: the pause lasts TTL*Num/Den.
	Num, Den int64
}

// LeaseBoundaries are the pause lengths around the lease TTL: just before
// it expires, just after, and half a TTL after. Each is a fraction of the
// TTL in use, never a constant.
var LeaseBoundaries = []LeaseBoundary{{"just-before-expiry", 9, 10}, {"just-after-expiry", 11, 10}, {"half-ttl-after-expiry", 3, 2}}

// Pause is the boundary's pause length for a lease TTL.
func (b LeaseBoundary) Pause(lease Builder) time.Duration {
	return time.Duration(lease.ttl*b.Num/b.Den) * time.Millisecond
}

// LeasePauses are the pause lengths a generator draws from: the
// boundaries and the long pause.
func (b Builder) LeasePauses() []time.Duration {
	out := make([]time.Duration, 0, len(LeaseBoundaries)+1)
	for _, lb := range LeaseBoundaries {
		out = append(out, lb.Pause(b))
	}
	return append(out, b.LongPause())
}

// leaseFaultCase is the window case of a lease fault: two holders of one
// document at once. A holder that believes its lease (a quarter of the TTL
// into it) stands parked before its state commit while the other ingests
// another version of the document and commits; then the first wakes up and
// its commit must be stopped by the revision CAS, not by the lease.
func (b Builder) leaseFaultCase(c Case, k faults.Kind) Case {
	stall := faults.PauseOn(time.Duration(b.ttl/4)*time.Millisecond, 1)
	first := Step{Worker: "holder", Actions: []Action{{Do: "ingest", Doc: "d3", Content: DocD3a}}, Arms: faults.Arms{faults.BeforeStateCommit: stall},
		Background: true, ContinueOnError: true, ExpectHit: []faults.Point{faults.BeforeStateCommit}, Meanwhile: &Meanwhile{Worker: "fault", Does: DeedCommit}}
	second := Step{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d3", Content: DocD3b}}, Arms: faults.Arms{faults.LeaseAcquire: faults.On(k, 1)},
		ExpectHit: []faults.Point{faults.LeaseAcquire}}
	if k == faults.Expire {
		// The first holder's lease is the one the store forgets. The
		// fault must fire; whether the holder still gets to its stall
		// depends on how long its steps take against its lease (it asks
		// the store, and is refused, once less than half the TTL is left):
		// always in the in-process mode, whose time is simulated, not
		// always with real processes on a slow backend.
		first.Worker, second.Worker = "fault", "competitor"
		first.Arms[faults.LeaseAcquire] = faults.On(k, 1)
		first.ExpectHit = []faults.Point{faults.LeaseAcquire}
		first.Meanwhile = &Meanwhile{Worker: "competitor", Does: DeedCommit}
		second.Arms, second.ExpectHit = nil, nil
	}
	c.Steps = []Step{first, second, RecoverStep("recover", nil), QuiesceStep(faults.Ingestion, first.Worker, second.Worker)}
	return c
}

// ClassCases are the case classes beside the windows.
func (b Builder) ClassCases() []Case {
	long := faults.PauseOn(b.LongPause(), 1)
	short := faults.PauseOn(b.ShortPause(), 1)
	cases := []Case{
		{ID: "class-duplicate-delivery", System: faults.Ingestion, Class: "duplicate-delivery",
			Description: "one operationId delivered three times: after a crash mid-write, two workers resubmit it at once (the first stalls mid-resume past its lease while the second takes over)",
			Steps: []Step{
				{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Op: "dup-op", Content: DocD1v1}}, Arms: faults.Arms{faults.BetweenGraphBatches: faults.On(faults.Crash, 1)}, ExpectHit: []faults.Point{faults.BetweenGraphBatches}},
				{Worker: "dup-a", Actions: []Action{{Do: "ingest", Doc: "d1", Op: "dup-op", Content: DocD1v1}}, Arms: faults.Arms{faults.BeforeGraphWrite: long},
					Background: true, ContinueOnError: true, ExpectHit: []faults.Point{faults.BeforeGraphWrite}, Meanwhile: &Meanwhile{Worker: "dup-b", Does: DeedGraph}},
				{Worker: "dup-b", Actions: []Action{{Do: "ingest", Doc: "d1", Op: "dup-op", Content: DocD1v1}}, ContinueOnError: true},
				QuiesceStep(faults.Ingestion),
			}},
		{ID: "class-model-differs", System: faults.Ingestion, Class: "model-differs",
			Description: "the model would answer differently on a second call under a used operationId; the resubmission must use the frozen plan",
			Steps: []Step{
				{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Op: "model-op", Content: DocD1v1}}, Arms: faults.Arms{faults.BeforeGraphWrite: faults.On(faults.Crash, 1)}, ExpectHit: []faults.Point{faults.BeforeGraphWrite}},
				{Worker: "resubmit", Actions: []Action{{Do: "ingest", Doc: "d1", Op: "model-op", Content: DocD1v1}, {Do: "resume", Op: "model-op"}}, ContinueOnError: true},
				QuiesceStep(faults.Ingestion),
			}},
		{ID: "class-entity-race", System: faults.Ingestion, Class: "entity-race",
			Description: "two documents register the same entity and support the same edge at once; one worker dies before its state commit",
			Steps: []Step{
				{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}}, Arms: faults.Arms{faults.BeforeStateCommit: short}, Background: true, ExpectHit: []faults.Point{faults.BeforeStateCommit},
					Meanwhile: &Meanwhile{Worker: "other", Does: DeedGraph}},
				{Worker: "other", Actions: []Action{{Do: "ingest", Doc: "d2", Content: DocD2}}, Arms: faults.Arms{faults.BeforeStateCommit: faults.On(faults.Crash, 1)}, ExpectHit: []faults.Point{faults.BeforeStateCommit}},
				QuiesceStep(faults.Ingestion, "fault", "other"),
			}},
		{ID: "class-competing-revision", System: faults.Ingestion, Class: "competing-revision",
			Description: "two versions of one document race; the loser pauses past its lease before its state commit and must be refused, then planned anew",
			Steps: []Step{
				{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d3", Content: DocD3a}}, Arms: faults.Arms{faults.BeforeLeaseCheck: long}, Background: true, ExpectHit: []faults.Point{faults.BeforeLeaseCheck},
					Meanwhile: &Meanwhile{Worker: "competitor", Does: DeedCommit}},
				{Worker: "competitor", Actions: []Action{{Do: "ingest", Doc: "d3", Content: DocD3b}}, ContinueOnError: true},
				QuiesceStep(faults.Ingestion, "fault"),
			}},
		{ID: "class-stale-reader", System: faults.Ingestion, Class: "stale-reader",
			Description: "one instance ingests a document, then stalls writing another one (holding that one's lease only); meanwhile a second instance commits a new version of the first document and is answered; the first instance then ingests its old content again and must read that commit (a new revision, not a NO_OP at the revision it had read before): a store that serves an instance what it read or wrote itself, missing what another instance committed since, fails here",
			Steps: []Step{
				{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}, {Do: "ingest", Doc: "d2", Content: DocD2}, {Do: "ingest", Doc: "d1", Content: DocD1v1}},
					Arms: faults.Arms{faults.BeforeGraphWrite: faults.PauseOn(b.ShortPause(), 2)}, Background: true,
					ExpectHit: []faults.Point{faults.BeforeGraphWrite}, Meanwhile: &Meanwhile{Worker: "other", Does: DeedCommit}},
				{Worker: "other", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v2}}},
				QuiesceStep(faults.Ingestion, "fault"),
			}},
		operationIDReused("operation-id-reused", "an ingestion under a caller's operationId crashes after its state commit; the caller then submits other content under the same operationId: it must be refused (plan conflict), not answered with the first content's commit", faults.BeforeCompleted, faults.Crash),
		retractAgain("retract-again", "a document is ingested, retracted and ingested again, then retracted a second time while another document's commit crashes: the second retraction is a new operation on the current revision, never the first one found done", faults.BeforeStateCommit),
		entityVariants("entity-variants", "two documents name the same entities in other case ('Org:Acme', 'Org:ACME', 'Person:ALICE') and plan at once: the first stalls before its registry save while the second commits; one entity must get one node id and one registration, and both documents must commit", faults.BeforeRegistrySave, short),
		retractionSharedEdgeCrossed("retraction-shared-edge-crossed", "two documents share an edge; the retraction of one writes its graph (keeping the edge the other still supports) and crashes before its state commit; the other is retracted meanwhile (keeping the edge for the first); when the first retraction commits, nothing supports the edge any more and it must go", faults.BeforeStateCommit, faults.Crash),
		replanAfterDeadLetter("replan-after-dead-letter", "an ingestion crashes before its graph write; another version of the document commits; the first content is ingested again on that revision and fails for good (dead letter); when the first operation is resubmitted, its conflict re-plans the content on the latest revision under the operationId a fresh ingestion of it gets, the dead-lettered one, never a second plan for one intent", faults.BeforeGraphWrite),
		staleWriterAfterNoop("stale-writer-after-noop", "a writer stalls past its lease before its state commit; meanwhile another instance takes the document's lease for a retraction that finds nothing to retract (the revision does not move): when the writer wakes, only the lease can refuse its commit", false, long),
		splitBrainSameIntent("split-brain-same-intent", "two holders plan one ingestion at once (split brain): the first asked the model and stalls before freezing its plan; the second is granted the live lease, asks the model again, freezes the other answer and dies; the first must not run its own plan under the frozen operation",
			faults.Arms{faults.BeforePrepare: faults.PauseOn(time.Duration(b.ttl/4)*time.Millisecond, 1)}, []faults.Point{faults.BeforePrepare},
			faults.Arms{faults.LeaseAcquire: faults.On(faults.Split, 1), faults.BeforeGraphWrite: faults.On(faults.Crash, 1)}, []faults.Point{faults.LeaseAcquire, faults.BeforeGraphWrite}),
		resubmitAfterFailure("resubmit-after-failure", "an ingestion fails with a retryable error before its graph write (its operation is FAILED, one attempt recorded); its caller resubmits the same content before any recovery: the retry must keep the operationId and its frozen plan, not mint a new one with a second model call", faults.BeforeGraphWrite),
		reingestAfterRetraction("reingest-after-retraction", "a document is ingested and retracted, then the same content is ingested again (another document's commit crashes meanwhile): the last answer must leave the document ACTIVE with that content, not a NO_OP over the retraction", faults.BeforeStateCommit),
		retractionSharedEdge("retraction-shared-edge", "a document is retracted while another still supports one of its edges; the retraction crashes mid-way", faults.BeforeStateCommit, faults.Crash),
	}
	cases = append(cases, b.replanCases()...) // replan.go
	// The in-flight classes: inflight.go.
	cases = append(cases, b.inFlightCases()...)
	for i := range cases {
		cases[i].TTLMillis = b.ttl
	}
	return cases
}

// splitBrainSameIntent: two holders plan one ingestion at once. The
// holder (holder arms) asked the model and stalls before freezing its
// plan; meanwhile the second (fault arms, which crash it at its graph
// write) is granted the lease, asks the model again and freezes the other
// answer.
func splitBrainSameIntent(class, desc string, holder faults.Arms, holderHits []faults.Point, fault faults.Arms, faultHits []faults.Point) Case {
	return Case{ID: "class-" + class, System: faults.Ingestion, Class: class, Description: desc,
		Steps: []Step{
			{Worker: "holder", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}}, Arms: holder,
				Background: true, ContinueOnError: true, ExpectHit: holderHits, Meanwhile: &Meanwhile{Worker: "fault", Does: DeedFreeze}},
			{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}}, Arms: fault, ExpectHit: faultHits},
			QuiesceStep(faults.Ingestion, "holder", "fault"),
		}}
}

// resubmitAfterFailure: an ingestion fails with a retryable error at p,
// and its caller resubmits the same content before any recovery.
func resubmitAfterFailure(class, desc string, p faults.Point) Case {
	return Case{ID: "class-" + class, System: faults.Ingestion, Class: class, Description: desc,
		Steps: []Step{
			{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}}, Arms: faults.Arms{p: faults.On(faults.Transient, 1)}, ExpectHit: []faults.Point{p}},
			{Worker: "resubmit", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}}, ContinueOnError: true},
			QuiesceStep(faults.Ingestion),
		}}
}

// reingestAfterRetraction: d1 is ingested and retracted, d2's ingestion
// crashes at p, and d1's content is ingested again.
func reingestAfterRetraction(class, desc string, p faults.Point) Case {
	return Case{ID: "class-" + class, System: faults.Ingestion, Class: class, Description: desc,
		Steps: []Step{
			{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}, {Do: "retract", Doc: "d1"}, {Do: "ingest", Doc: "d2", Content: DocD2}},
				Arms: faults.Arms{p: faults.On(faults.Crash, 3)}, ExpectHit: []faults.Point{p}},
			{Worker: "again", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}}, ContinueOnError: true},
			QuiesceStep(faults.Ingestion, "fault"),
		}}
}

// retractionSharedEdge: d1 is retracted while d2 still supports one of its
// edges, the retraction meets fault k at p, and recovery runs.
func retractionSharedEdge(class, desc string, p faults.Point, k faults.Kind) Case {
	return Case{ID: "class-" + class, System: faults.Ingestion, Class: class, Description: desc,
		Steps: []Step{
			{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}, {Do: "ingest", Doc: "d2", Content: DocD2}, {Do: "retract", Doc: "d1"}},
				Arms: faults.Arms{p: faults.On(k, 3)}, ExpectHit: []faults.Point{p}},
			RecoverStep("recover", nil),
			QuiesceStep(faults.Ingestion, "fault"),
		}}
}

// BoundaryCases stall a writer for each lease boundary before its graph
// write: just before expiry nobody else runs meanwhile and the writer must
// renew through the store and go on; just after and half a TTL after,
// recovery takes the document over meanwhile and the writer must be
// refused when it wakes (a holder that trusts its lease past its expiry
// writes as a stale holder).
func (b Builder) BoundaryCases() []Case {
	var out []Case
	for _, lb := range LeaseBoundaries {
		var meanwhile *Meanwhile
		if lb.Num > lb.Den {
			meanwhile = &Meanwhile{Worker: "recover", Does: DeedLease}
		}
		out = append(out, Case{ID: "class-lease-" + lb.Name, System: faults.Ingestion, Class: "lease-" + lb.Name, TTLMillis: b.ttl,
			Description: fmt.Sprintf("a writer stalls %d/%d of the lease TTL before its graph write while recovery takes the document over; a stale holder must be refused by the store", lb.Num, lb.Den),
			Steps: []Step{
				{Worker: "fault", Actions: StandardScript(), Arms: faults.Arms{faults.BeforeGraphWrite: faults.PauseOn(lb.Pause(b), 1)},
					Background: lb.Num > lb.Den, ContinueOnError: true, ExpectHit: []faults.Point{faults.BeforeGraphWrite}, Meanwhile: meanwhile},
				RecoverStep("recover", nil),
				QuiesceStep(faults.Ingestion, "fault"),
			}})
	}
	return out
}

// Matrix returns every window x applicable kind, then the case classes
// and the lease boundaries.
func (b Builder) Matrix() []Case {
	var out []Case
	for _, s := range faults.Catalogue {
		for _, k := range faults.Kinds {
			if c, ok := b.WindowCase(s.Point, k); ok {
				out = append(out, c)
			}
		}
	}
	out = append(out, b.ClassCases()...)
	out = append(out, b.BoundaryCases()...)
	return append(out, b.SecondCases()...) // second.go
}

func caseID(parts ...string) string {
	return strings.ToLower(strings.Join(parts, "-"))
}

// RecrashWorker is the worker of a recrash case that crashes a second time
// at the window, in the recovery of the first crash (windowCase).
const RecrashWorker = "recover-crash"
