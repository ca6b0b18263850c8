package reference

import (
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

// Bug names a deliberate defect the reference service can be built with, so
// that the harness can prove it catches it (a mutant). The zero Service has
// none.
type Bug string

// The service mutants. The first three are gross defects; the others are
// the kind of slip a careful engineer makes (an order swapped, an id minted
// in the wrong place, a key or a boundary chosen wrongly, a classification
// mistake), each hidden from the invariants that compare the service's own
// records with themselves.
const (
	// BugRecallModelOnResume re-asks the model on resume and executes its
	// new answer instead of the persisted plan.
	BugRecallModelOnResume Bug = "recall-model-on-resume"
	// BugSkipRevisionCheck does not verify the expected revision and
	// commits the state on top of whatever revision is current.
	BugSkipRevisionCheck Bug = "skip-revision-check"
	// BugAdvanceBeforeGraphWrite moves the stage to GRAPH_APPLIED before
	// the graph write is confirmed.
	BugAdvanceBeforeGraphWrite Bug = "advance-before-graph-write"
	// BugCASOnFreshRevision takes the state commit's expected revision
	// from a fresh read just before the compare-and-set instead of the
	// revision the plan was made against.
	BugCASOnFreshRevision Bug = "cas-on-fresh-revision"
	// BugPlanIdentityIgnoresProperties compares a re-made plan with the
	// frozen one by a digest that leaves out node and edge properties, so
	// a plan that differs only there is taken for the frozen one and run.
	BugPlanIdentityIgnoresProperties Bug = "plan-identity-ignores-properties"
	// BugNewOperationOnRetry resubmits a failed ingestion under a new
	// operationId (the old one plus its attempt count), with a fresh model
	// call.
	BugNewOperationOnRetry Bug = "new-operation-on-retry"
	// BugStateBeforeRegistry commits the document state before the entity
	// registry save (an order swap): a crash between leaves a committed
	// state whose entities recovery never registers.
	BugStateBeforeRegistry Bug = "state-before-registry"
	// BugRetryPermanentErrors classifies injected permanent errors as
	// retryable, so they are retried until the budget runs out instead of
	// going to the dead letter at once.
	BugRetryPermanentErrors Bug = "retry-permanent-errors"
	// BugResumeIgnoresClaim lets recovery resume an operation whose claim
	// another instance holds.
	BugResumeIgnoresClaim Bug = "resume-ignores-claim"
	// BugLeaseTrustedAfterExpiry trusts a lease locally for half a TTL past
	// its expiry (a clock-drift margin applied in the wrong direction).
	BugLeaseTrustedAfterExpiry Bug = "lease-trusted-after-expiry"
	// BugReplanIDPerAttempt mints the operationId of a re-plan after a
	// revision conflict from the time of the attempt, so a crash during
	// conflict handling makes a second re-plan of the same intent.
	BugReplanIDPerAttempt Bug = "replan-id-per-attempt"
	// BugNoOpIgnoresRetraction answers NO_OP to a re-ingestion of the
	// content a document had before it was retracted.
	BugNoOpIgnoresRetraction Bug = "noop-ignores-retraction"
	// BugDeadLetterWithoutReconcile records the dead letter without
	// removing the graph effects of its plan.
	BugDeadLetterWithoutReconcile Bug = "dead-letter-without-reconcile"
	// BugIgnoreRefusedStateCAS treats a refused state compare-and-set as a
	// commit and completes the operation.
	BugIgnoreRefusedStateCAS Bug = "ignore-refused-state-cas"
	// BugDeleteSharedEdges deletes the edges a plan made stale without
	// asking whether another ACTIVE document still supports them.
	BugDeleteSharedEdges Bug = "delete-shared-edges"
	// The between-calls mutants: each one's defect sits between two named
	// windows, out of reach of a competitor parked at a window; only a
	// stale holder stalled before one of its store calls (faults.StoreCall)
	// shows it (reference/between.go).

	// BugCASOnHealedRevision takes the state commit's expected revision
	// from the read that heals the history after the lease check, not from
	// the plan.
	BugCASOnHealedRevision Bug = "cas-on-healed-revision"
	// BugRevisionReadBeforeLeaseCheck reads the revision the state commit
	// expects before the lease check instead of taking the plan's (the
	// lease renewed after the read it should fence).
	BugRevisionReadBeforeLeaseCheck Bug = "revision-read-before-lease-check"
	// BugRebaseFreshPlan rebases a plan it has just frozen onto the
	// revision it reads after the freeze, when the document moved meanwhile.
	BugRebaseFreshPlan Bug = "rebase-fresh-plan"
	// BugAnswerCurrentRevision answers COMPLETED with the document's
	// current revision, read after the last stage advance, instead of the
	// revision the operation committed.
	BugAnswerCurrentRevision Bug = "answer-current-revision"
	// BugStaleEdgesFromCurrent takes the edges a commit made stale from
	// the document's current state, read after the commit, instead of from
	// the plan.
	BugStaleEdgesFromCurrent Bug = "stale-edges-from-current-state"
	// BugRebaseAfterGraphWrite checks the revision again after the graph
	// write and, when it moved, commits onto the new one instead of
	// refusing (a check after the write, which rebases).
	BugRebaseAfterGraphWrite Bug = "rebase-after-graph-write"
	// BugResubmitIgnoresContent resumes a caller's operationId submitted
	// again with other content, running the frozen plan of the first
	// content, instead of refusing it (ErrPlanConflict).
	BugResubmitIgnoresContent Bug = "resubmit-ignores-content"
	// BugRetractIDWithoutRevision names a retraction after its document
	// alone, not the revision it retracts: a second retraction after a
	// re-ingestion is taken for the first, already done.
	BugRetractIDWithoutRevision Bug = "retract-id-without-revision"
	// BugNodeIDIgnoresCase derives a node id from the type and the name as
	// written (trimmed), not as normalised: one entity spelt in two cases
	// gets two node ids, and the second registration conflicts.
	BugNodeIDIgnoresCase Bug = "node-id-ignores-case"
	// BugRetractionSkipsStaleCleanup skips the stale-edge cleanup at a
	// retraction's commit: an edge it kept for another document whose
	// support went meanwhile outlives both.
	BugRetractionSkipsStaleCleanup Bug = "retraction-skips-stale-cleanup"
	// BugReplanIDFromOldOperation names a conflict's re-plan after the old
	// operationId and the latest revision, not after the intent (content
	// on the latest revision): a fresh ingestion of the content and the
	// re-plan freeze two plans for one intent.
	BugReplanIDFromOldOperation Bug = "replan-id-from-old-operation"
	// BugCommitWithoutLeaseCheck commits the state without checking the
	// lease again after a stall: the revision CAS alone stops a stale
	// writer only when the revision moved.
	BugCommitWithoutLeaseCheck Bug = "commit-without-lease-check"
	// BugScanSkipsPendingDeadLetter leaves out of the recovery scan the
	// operations whose dead letter is under way (DeadLetterPending): one
	// cut short by a crash stays unfinished for ever unless its caller
	// resubmits it.
	BugScanSkipsPendingDeadLetter Bug = "scan-skips-pending-dead-letter"
	// BugSupportIgnoresPendingPlans counts an edge's support from the
	// committed ACTIVE states alone, not from the plans of other
	// unfinished operations: a cleanup deletes an edge another document's
	// plan in flight has written and is about to commit.
	BugSupportIgnoresPendingPlans Bug = "support-ignores-pending-plans"
	// BugPlanSaveKeyPerAttempt (System B) mints the operation_id of the
	// save step per attempt instead of taking the one kept in the
	// workflow state.
	BugPlanSaveKeyPerAttempt = Bug(plansave.BugKeyPerAttempt)
	// BugPlanSaveCheckpointFirst (System B) records the save step as done
	// in the checkpoint before the business commit (an order swap).
	BugPlanSaveCheckpointFirst = Bug(plansave.BugCheckpointFirst)
)

// Bugs lists the service mutants.
var Bugs = []Bug{BugRecallModelOnResume, BugSkipRevisionCheck, BugAdvanceBeforeGraphWrite,
	BugCASOnFreshRevision, BugPlanIdentityIgnoresProperties, BugNewOperationOnRetry, BugStateBeforeRegistry,
	BugRetryPermanentErrors, BugResumeIgnoresClaim, BugLeaseTrustedAfterExpiry, BugReplanIDPerAttempt,
	BugNoOpIgnoresRetraction, BugDeadLetterWithoutReconcile, BugIgnoreRefusedStateCAS, BugDeleteSharedEdges,
	BugCASOnHealedRevision, BugRevisionReadBeforeLeaseCheck, BugRebaseFreshPlan, BugAnswerCurrentRevision,
	BugStaleEdgesFromCurrent, BugRebaseAfterGraphWrite,
	BugResubmitIgnoresContent, BugRetractIDWithoutRevision, BugNodeIDIgnoresCase, BugRetractionSkipsStaleCleanup, BugReplanIDFromOldOperation,
	BugCommitWithoutLeaseCheck, BugScanSkipsPendingDeadLetter, BugSupportIgnoresPendingPlans,
	BugPlanSaveKeyPerAttempt, BugPlanSaveCheckpointFirst}

// System says which protocol a mutant breaks: the ingestion service's
// mutants are switched on in Service.Bugs, System B's in
// plansave.Workflow.Bugs.
func (b Bug) System() faults.System {
	if plansave.IsBug(string(b)) {
		return faults.PlanSave
	}
	return faults.Ingestion
}
