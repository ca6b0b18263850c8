package scenarios

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

var updateLibrary = flag.Bool("update-library", false, "rewrite scenarios/library from the simulator's cases")

// libraryLeaseTTL is the lease TTL the library's pause durations assume.
const libraryLeaseTTL = 250 * time.Millisecond

// mirror says which simulator case a library scenario mirrors, and what
// is added on top.
type mirror struct {
	name, lead string
	point      faults.Point
	kind       faults.Kind
	class      string // a sim.ClassCases class instead of a window
	// call, with kind split or expire, pins a between-calls case: the
	// stale holder stalls before this store call (sim.BetweenCallsCase).
	call    int
	bugs    []reference.Bug
	mutant  string
	backend string
	breaks  []check.Invariant
	// leaseTTL overrides the library's lease TTL (and scales the case's
	// pauses) where a real process's start-up must stay small beside it.
	leaseTTL time.Duration
}

func (m mirror) ttl() time.Duration {
	if m.leaseTTL > 0 {
		return m.leaseTTL
	}
	return libraryLeaseTTL
}

func (m mirror) simCase(t testing.TB) catalogue.Case {
	if m.class != "" {
		for _, c := range append(catalogue.Lease(m.ttl()).ClassCases(), catalogue.Lease(m.ttl()).BoundaryCases()...) {
			if c.Class == m.class {
				return c
			}
		}
		t.Fatalf("%s: no class case %q", m.name, m.class)
	}
	if m.call > 0 {
		return catalogue.Lease(m.ttl()).BetweenCallsCase(m.kind, m.call, 0)
	}
	c, ok := catalogue.Lease(m.ttl()).WindowCase(m.point, m.kind)
	if !ok {
		t.Fatalf("%s: kind %s does not apply at %s", m.name, m.kind, m.point)
	}
	return c
}

// libraryMirrors lists every scenario of the library that mirrors a
// simulator case.
var libraryMirrors = []mirror{
	{name: "window-before-extract", point: faults.BeforeExtract, kind: faults.Crash},
	{name: "window-before-prepare", point: faults.BeforePrepare, kind: faults.Crash},
	{name: "window-before-graph-write", point: faults.BeforeGraphWrite, kind: faults.Crash},
	{name: "window-between-graph-batches", point: faults.BetweenGraphBatches, kind: faults.Crash},
	{name: "window-before-graph-applied", point: faults.BeforeGraphApplied, kind: faults.Crash},
	{name: "window-before-registry-save", point: faults.BeforeRegistrySave, kind: faults.Crash},
	{name: "window-before-state-commit", point: faults.BeforeStateCommit, kind: faults.Crash},
	{name: "window-before-record-version", point: faults.BeforeRecordVersion, kind: faults.Crash},
	{name: "window-before-state-committed", point: faults.BeforeStateCommitted, kind: faults.Crash},
	{name: "window-before-completed", point: faults.BeforeCompleted, kind: faults.Crash},
	{name: "window-before-mark-failed", point: faults.BeforeMarkFailed, kind: faults.Crash},
	{name: "window-before-dead-letter", point: faults.BeforeDeadLetter, kind: faults.Crash},
	{name: "window-before-retry-prepared", point: faults.BeforeRetryPrepared, kind: faults.Crash},
	{name: "window-before-lease-check", point: faults.BeforeLeaseCheck, kind: faults.Crash},
	{name: "window-recovery-before-claim", point: faults.RecoveryBeforeClaim, kind: faults.Crash},
	{name: "window-recovery-before-resume", point: faults.RecoveryBeforeResume, kind: faults.Crash},
	{name: "window-conflict-before-abandon", point: faults.ConflictBeforeAbandon, kind: faults.Crash},
	{name: "window-conflict-before-replan", point: faults.ConflictBeforeReplan, kind: faults.Crash},
	{name: "window-lease-acquire", point: faults.LeaseAcquire, kind: faults.Crash},
	{name: "window-plansave-before-approve", point: faults.PlanSaveBeforeApprove, kind: faults.Crash},
	{name: "window-plansave-before-business-commit", point: faults.PlanSaveBeforeBusiness, kind: faults.Crash},
	{name: "window-plansave-before-checkpoint", point: faults.PlanSaveBeforeCheckpoint, kind: faults.Transient},

	{name: "class-unknown-window", point: faults.BeforeGraphApplied, kind: faults.Unknown,
		lead: "The unknown window: the graph write commits, the process dies before it learns so; recovery re-applies the same mutation, which must be idempotent."},
	{name: "class-lease-expiry-stale-writer", point: faults.BeforeLeaseCheck, kind: faults.Pause,
		lead: "A writer stalls past its lease before the state commit while recovery takes the document over; when the stale writer wakes up, its commit must be refused."},
	{name: "class-competing-revision", class: "competing-revision"},
	{name: "class-duplicate-delivery", class: "duplicate-delivery"},
	{name: "class-model-differs", class: "model-differs"},
	{name: "class-entity-race", class: "entity-race"},
	{name: "class-stale-reader", class: "stale-reader"},
	{name: "class-operation-id-reused", class: "operation-id-reused"},
	{name: "class-retract-again", class: "retract-again"},
	{name: "class-entity-variants", class: "entity-variants"},
	{name: "class-retraction-shared-edge-crossed", class: "retraction-shared-edge-crossed"},
	{name: "class-replan-after-dead-letter", class: "replan-after-dead-letter"},
	{name: "class-stale-writer-after-noop", class: "stale-writer-after-noop"},
	{name: "class-retraction-shared-edge", class: "retraction-shared-edge"},
	{name: "class-resubmit-after-failure", class: "resubmit-after-failure"},
	{name: "class-reingest-after-retraction", class: "reingest-after-retraction"},
	{name: "class-stale-holder-renews", class: catalogue.StaleHolderRenewsClass},
	{name: "class-dead-letter-cut-short", class: catalogue.DeadLetterCutShortClass},
	{name: "class-retraction-while-plan-in-flight", class: catalogue.RetractionWhilePlanInFlightClass},
	{name: "class-crash-during-recovery", point: faults.BeforeStateCommit, kind: faults.Recrash,
		lead: "A crash, then the first recovery crashes at the same window again; the second recovery must still finish with the persisted plan."},
	{name: "class-plansave-retry", point: faults.PlanSaveBeforeCheckpoint, kind: faults.Crash,
		lead: "System B: the plan row is committed, the checkpoint is not; the resumed workflow runs save again with the same operation_id and must get the first row id back."},

	{name: "mutant-recall-model-on-resume", point: faults.BeforeGraphWrite, kind: faults.Crash,
		bugs: []reference.Bug{reference.BugRecallModelOnResume}, breaks: []check.Invariant{check.I1},
		lead: "Pins bug recall-model-on-resume: resuming re-asks the model, whose second answer differs; I1 must catch the second plan under one operationId."},
	{name: "mutant-create-instead-of-merge", point: faults.BeforeGraphApplied, kind: faults.Unknown,
		mutant: sim.MutantCreateNotMerge, backend: "sqlite", breaks: []check.Invariant{check.I3},
		lead: "Pins mutant create-instead-of-merge: re-applying the mutation after the unknown window creates duplicate nodes and edges; I3 must catch them."},
	{name: "mutant-skip-revision-check", point: faults.ConflictBeforeReplan, kind: faults.Crash,
		bugs: []reference.Bug{reference.BugSkipRevisionCheck}, breaks: []check.Invariant{check.I2},
		lead: "Pins bug skip-revision-check: the old plan of d3 commits over the competitor's newer revision; I2 must catch the stale-revision commit."},
	{name: "mutant-advance-before-graph-write", point: faults.BeforeGraphWrite, kind: faults.Crash,
		bugs: []reference.Bug{reference.BugAdvanceBeforeGraphWrite}, breaks: []check.Invariant{check.I4},
		lead: "Pins bug advance-before-graph-write: the stage reaches GRAPH_APPLIED before the graph write is confirmed; I4 must catch the illegal stage order."},
	{name: "mutant-cas-on-fresh-revision", point: faults.LeaseAcquire, kind: faults.Split, leaseTTL: 2 * time.Second,
		bugs: []reference.Bug{reference.BugCASOnFreshRevision}, breaks: []check.Invariant{check.I2},
		lead: "Pins bug cas-on-fresh-revision: with the lease broken (split brain), the stale holder's state commit takes its expected revision from a fresh read and commits its old plan over the newer revision; I2 must catch a commit that replaced a revision its plan was not made against."},
	{name: "mutant-ignore-refused-state-cas", point: faults.LeaseAcquire, kind: faults.Expire, leaseTTL: 2 * time.Second,
		bugs: []reference.Bug{reference.BugIgnoreRefusedStateCAS}, breaks: []check.Invariant{check.I4},
		lead: "Pins bug ignore-refused-state-cas: with the lease broken (early expiry), the stale holder's refused state commit is taken for a commit and the operation completes; I4 must catch STATE_COMMITTED without a commit."},
	{name: "mutant-plan-identity-ignores-properties", class: "split-brain-same-intent", leaseTTL: 2 * time.Second,
		bugs: []reference.Bug{reference.BugPlanIdentityIgnoresProperties}, breaks: []check.Invariant{check.I1},
		lead: "Pins bug plan-identity-ignores-properties: two holders plan one intent at once; the plan comparison leaves out properties, so the stale holder runs its own answer under the frozen operation; I1 must catch graph content no frozen plan holds."},
	{name: "mutant-state-before-registry", point: faults.BeforeRegistrySave, kind: faults.Crash,
		bugs: []reference.Bug{reference.BugStateBeforeRegistry}, breaks: []check.Invariant{check.I6},
		lead: "Pins bug state-before-registry: the state is committed before the registry save, and a crash between leaves ACTIVE entities recovery never registers; I6 must catch a supported node that is not registered."},
	{name: "mutant-retry-permanent-errors", point: faults.BeforeGraphWrite, kind: faults.Persistent,
		bugs: []reference.Bug{reference.BugRetryPermanentErrors}, breaks: []check.Invariant{check.I5},
		lead: "Pins bug retry-permanent-errors: a permanent error that persists across retries is classified as retryable and retried until the budget runs out; I5 must catch a permanent failure resumed past the dead-letter bound."},
	{name: "mutant-resume-ignores-claim", point: faults.RecoveryBeforeResume, kind: faults.Crash, leaseTTL: 2 * time.Second,
		bugs: []reference.Bug{reference.BugResumeIgnoresClaim}, breaks: []check.Invariant{check.I7},
		lead: "Pins bug resume-ignores-claim: recovery resumes an operation whose claim a dead instance still holds; I7 must catch a resume under another instance's live claim."},
	{name: "mutant-lease-trusted-after-expiry", class: "lease-just-after-expiry", leaseTTL: 2 * time.Second,
		bugs: []reference.Bug{reference.BugLeaseTrustedAfterExpiry}, breaks: []check.Invariant{check.I7},
		lead: "Pins bug lease-trusted-after-expiry: a writer that stalled just past its lease trusts it locally and writes after recovery took the document over; I7 must catch the stale holder's write."},
	{name: "mutant-dead-letter-without-reconcile", point: faults.BeforeStateCommit, kind: faults.Permanent,
		bugs: []reference.Bug{reference.BugDeadLetterWithoutReconcile}, breaks: []check.Invariant{check.I3},
		lead: "Pins bug dead-letter-without-reconcile: a dead letter leaves its plan's edges in the graph; I3 must catch edges no ACTIVE document supports."},
	{name: "mutant-delete-shared-edges", class: "retraction-shared-edge",
		bugs: []reference.Bug{reference.BugDeleteSharedEdges}, breaks: []check.Invariant{check.I3},
		lead: "Pins bug delete-shared-edges: a retraction deletes an edge another ACTIVE document still supports; I3 must catch the missing edge."},
	{name: "mutant-resubmit-ignores-content", class: "operation-id-reused",
		bugs: []reference.Bug{reference.BugResubmitIgnoresContent}, breaks: []check.Invariant{check.I9},
		lead: "Pins bug resubmit-ignores-content: a caller's operationId submitted again with other content after a crash runs the first content's frozen plan and is answered COMPLETED; I9 must catch an answer whose revision holds other content."},
	{name: "mutant-retract-id-without-revision", class: "retract-again",
		bugs: []reference.Bug{reference.BugRetractIDWithoutRevision}, breaks: []check.Invariant{check.I9},
		lead: "Pins bug retract-id-without-revision: a second retraction after a re-ingestion is named like the first and answered ALREADY_COMPLETED at its old revision; I9 must catch an answer older than a revision already acknowledged."},
	{name: "mutant-node-id-ignores-case", class: "entity-variants",
		bugs: []reference.Bug{reference.BugNodeIDIgnoresCase}, breaks: []check.Invariant{check.I6},
		lead: "Pins bug node-id-ignores-case: two documents spell one entity in other case and derive two node ids; I6 must catch one entity with two node ids in the frozen plans."},
	{name: "mutant-retraction-skips-stale-cleanup", class: "retraction-shared-edge-crossed",
		bugs: []reference.Bug{reference.BugRetractionSkipsStaleCleanup}, breaks: []check.Invariant{check.I3},
		lead: "Pins bug retraction-skips-stale-cleanup: a retraction kept an edge for a document retracted meanwhile and skips the cleanup at its commit; I3 must catch the edge nothing supports."},
	{name: "mutant-replan-id-from-old-operation", class: "replan-after-dead-letter",
		bugs: []reference.Bug{reference.BugReplanIDFromOldOperation}, breaks: []check.Invariant{check.I1},
		lead: "Pins bug replan-id-from-old-operation: a conflict's re-plan is named after the old operation, beside the operation a fresh ingestion of the content froze; I1 must catch two plans for one intent."},
	{name: "mutant-commit-without-lease-check", class: "stale-writer-after-noop",
		bugs: []reference.Bug{reference.BugCommitWithoutLeaseCheck}, breaks: []check.Invariant{check.I7},
		lead: "Pins bug commit-without-lease-check: a writer stalled past its lease commits after another instance held the lease for a no-op retraction; the revision did not move, so only I7 can catch the stale holder's commit."},
	{name: "mutant-renew-ignores-holder", class: catalogue.StaleHolderRenewsClass,
		mutant: sim.MutantRenewIgnoresHolder, backend: "sqlite", breaks: []check.Invariant{check.I7},
		lead: "Pins mutant renew-ignores-holder: the SQL stores' lease renewal matches the document and a live expiry, not the holder and its token; a holder stalled past its lease renews the lease its competitor was granted and writes its graph; I7 must catch a write after the lease went to another holder."},
	{name: "mutant-scan-skips-pending-dead-letter", class: catalogue.DeadLetterCutShortClass,
		bugs: []reference.Bug{reference.BugScanSkipsPendingDeadLetter}, breaks: []check.Invariant{check.I5},
		lead: "Pins bug scan-skips-pending-dead-letter: the recovery scan leaves out an operation whose dead letter a crash cut short, and nobody resubmits it; I5 must catch the operation left at GRAPH_APPLIED after recovery quiesced."},
	{name: "mutant-support-ignores-pending-plans", class: catalogue.RetractionWhilePlanInFlightClass,
		bugs: []reference.Bug{reference.BugSupportIgnoresPendingPlans}, breaks: []check.Invariant{check.I3},
		lead: "Pins bug support-ignores-pending-plans: a retraction counts an edge's support from committed states alone and deletes the edge another document's plan in flight has written; I3 must catch the edge missing when that document commits."},
	{name: "mutant-cas-on-healed-revision", kind: faults.Split, call: 11, leaseTTL: 2 * time.Second,
		bugs: []reference.Bug{reference.BugCASOnHealedRevision}, breaks: []check.Invariant{check.I2},
		lead: "Pins bug cas-on-healed-revision: the stale holder, stalled between its registry save and its state commit while a split-brain competitor commits, takes the revision it commits on from the read that heals the history; I2 must catch a commit over a revision its plan was not made against. No named window lies between that read and the commit: only a stall before a store call (point storeCall) shows it."},
	{name: "mutant-revision-read-before-lease-check", kind: faults.Expire, call: 11, leaseTTL: 2 * time.Second,
		bugs: []reference.Bug{reference.BugRevisionReadBeforeLeaseCheck}, breaks: []check.Invariant{check.I2},
		lead: "Pins bug revision-read-before-lease-check: the revision the state commit expects is read before the lease check (the fence comes after the read it should guard); with the lease expired early, a competitor commits just before that read and the stale holder commits over it; I2 must catch it."},
	{name: "mutant-rebase-fresh-plan", kind: faults.Split, call: 7, leaseTTL: 2 * time.Second,
		bugs: []reference.Bug{reference.BugRebaseFreshPlan}, breaks: []check.Invariant{check.I2},
		lead: "Pins bug rebase-fresh-plan: a plan just frozen is rebased onto the revision read after the freeze when a split-brain competitor committed meanwhile; I2 must catch the commit its frozen plan did not expect."},
	{name: "mutant-rebase-after-graph-write", kind: faults.Split, call: 9, leaseTTL: 2 * time.Second,
		bugs: []reference.Bug{reference.BugRebaseAfterGraphWrite}, breaks: []check.Invariant{check.I2},
		lead: "Pins bug rebase-after-graph-write: the revision is checked again after the graph write and, having moved under a split-brain competitor, rebased onto instead of refused; I2 must catch the commit over a revision the plan was not made against."},
	{name: "mutant-answer-current-revision", kind: faults.Split, call: 14, leaseTTL: 2 * time.Second,
		bugs: []reference.Bug{reference.BugAnswerCurrentRevision}, breaks: []check.Invariant{check.I9},
		lead: "Pins bug answer-current-revision: the COMPLETED answer carries the document's revision read after the last stage advance, which a split-brain competitor moved; I9 must catch an answer whose revision the operation did not commit."},
	{name: "mutant-stale-edges-from-current-state", kind: faults.Split, call: 12, leaseTTL: 2 * time.Second,
		bugs: []reference.Bug{reference.BugStaleEdgesFromCurrent}, breaks: []check.Invariant{check.I3},
		lead: "Pins bug stale-edges-from-current-state: after its commit the stale holder takes the edges it made stale from the current state, which a split-brain competitor replaced meanwhile, and deletes the competitor's edge; I3 must catch the ACTIVE document's missing edge."},
	{name: "mutant-plansave-key-per-attempt", point: faults.PlanSaveBeforeCheckpoint, kind: faults.Crash,
		bugs: []reference.Bug{reference.BugPlanSaveKeyPerAttempt}, breaks: []check.Invariant{check.I8},
		lead: "Pins bug plansave-key-per-attempt: the save step mints its operation_id per attempt, so the retried save inserts a second row under a new key; I8 must catch two rows for one logical save."},
	{name: "mutant-plansave-checkpoint-before-save", point: faults.PlanSaveBeforeBusiness, kind: faults.Crash,
		bugs: []reference.Bug{reference.BugPlanSaveCheckpointFirst}, breaks: []check.Invariant{check.I8},
		lead: "Pins bug plansave-checkpoint-before-save: the checkpoint records the save as done before the business commit; after a crash between, the thread is saved with no plan row; I8 must catch it."},
	{name: "mutant-no-unique-constraint", point: faults.PlanSaveBeforeCheckpoint, kind: faults.Crash,
		mutant: sim.MutantNoUniqueConstraint, backend: "sqlite", breaks: []check.Invariant{check.I8},
		lead: "Pins mutant no-unique-constraint: without UNIQUE(owner, operation_id) the repeated save inserts a second plan row; I8 must catch it."},
}

func (m mirror) scenario(t testing.TB) *Scenario {
	c := m.simCase(t)
	s, err := FromCase(c)
	if err != nil {
		t.Fatal(err)
	}
	s.Name = m.name
	if m.lead != "" {
		s.Description = m.lead + " (" + c.Description + ")"
	} else if m.class == "" {
		s.Description = fmt.Sprintf("Crash window %s. %s", m.point, c.Description)
	}
	s.Bugs, s.Mutant, s.Backend = m.bugs, m.mutant, m.backend
	for _, st := range s.Steps {
		for _, f := range st.Faults {
			if f.Kind == faults.Pause {
				s.LeaseTTL = m.ttl()
			}
		}
	}
	if m.leaseTTL > 0 {
		s.LeaseTTL = m.leaseTTL
	}
	if len(m.breaks) > 0 {
		s.Expect = Expect{Verdict: ExpectFail, Breaks: m.breaks}
	} else {
		s.Expect = Expect{Verdict: ExpectPass, Holds: append([]check.Invariant(nil), check.All...)}
	}
	return s
}

// TestGenerateLibrary rewrites the library with -update-library.
func TestGenerateLibrary(t *testing.T) {
	if !*updateLibrary {
		t.Skip("run with -update-library to rewrite scenarios/library")
	}
	for _, m := range libraryMirrors {
		b, err := m.scenario(t).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("library", m.name+".yaml"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
