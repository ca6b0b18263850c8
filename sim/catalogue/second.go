package catalogue

import (
	"fmt"

	"github.com/crashmatrix/crashmatrix/faults"
)

// SecondCases are the natural second case of the classes that were the
// only ones to catch a mutant (properties' TestMutantCatchesRestOnMoreThanOneCase
// counts them), so that a timing change in one case cannot lose it: the
// same interleaving at another window or under another kind.
func (b Builder) SecondCases() []Case {
	stale := faults.PauseOn(b.StaleStall(), 1)
	justAfter := LeaseBoundaries[1] // just after expiry
	short := faults.PauseOn(b.ShortPause(), 1)
	long := faults.PauseOn(b.LongPause(), 1)
	cases := []Case{
		splitBrainSameIntent("split-brain-same-intent-expire", "split-brain-same-intent under early expiry: the first holder's lease is forgotten by the store; it asked the model and stalls before freezing its plan while the second, granted the lease, asks the model again, freezes the other answer and dies; the first must not run its own plan under the frozen operation",
			faults.Arms{faults.LeaseAcquire: faults.On(faults.Expire, 1), faults.BeforePrepare: stale}, []faults.Point{faults.LeaseAcquire, faults.BeforePrepare},
			faults.Arms{faults.BeforeGraphWrite: faults.On(faults.Crash, 1)}, []faults.Point{faults.BeforeGraphWrite}),
		{ID: "class-lease-" + justAfter.Name + "-between-batches", System: faults.Ingestion, Class: "lease-" + justAfter.Name + "-between-batches",
			Description: fmt.Sprintf("a writer stalls %d/%d of the lease TTL between two graph batches while recovery takes the document over; a stale holder must be refused by the store before its next batch", justAfter.Num, justAfter.Den),
			Steps: []Step{
				{Worker: "fault", Actions: StandardScript(), Arms: faults.Arms{faults.BetweenGraphBatches: faults.PauseOn(justAfter.Pause(b), 1)},
					Background: true, ContinueOnError: true, ExpectHit: []faults.Point{faults.BetweenGraphBatches}, Meanwhile: &Meanwhile{Worker: "recover", Does: DeedLease}},
				RecoverStep("recover", nil),
				QuiesceStep(faults.Ingestion, "fault"),
			}},
		resubmitAfterFailure("resubmit-after-failure-graph-applied", "resubmit-after-failure past the graph write: the registry save fails with a retryable error (the operation stays GRAPH_APPLIED with one attempt recorded); the caller's resubmission must keep the operationId and its frozen plan", faults.BeforeRegistrySave),
		reingestAfterRetraction("reingest-after-retraction-graph-applied", "reingest-after-retraction with the other document's crash at another window (its graph write committed, its stage not advanced): re-ingesting the retracted content must leave the document ACTIVE, not answer NO_OP", faults.BeforeGraphApplied),
		operationIDReused("operation-id-reused-graph-applied", "operation-id-reused before the state commit: the caller's ingestion wrote its graph and died before it learnt so; other content under the same operationId must be refused, not answered with the first content's commit", faults.BeforeGraphApplied, faults.Unknown),
		retractAgain("retract-again-completed", "retract-again with the other document's crash after its state commit: the second retraction is a new operation on the current revision", faults.BeforeCompleted),
		entityVariants("entity-variants-graph-write", "entity-variants with the first document stalled before its graph write: the second plans, registers and commits meanwhile; one entity must get one node id", faults.BeforeGraphWrite, short),
		retractionSharedEdgeCrossed("retraction-shared-edge-crossed-unknown", "retraction-shared-edge-crossed with the first retraction's graph write committed and its worker dead before it learnt so: when it commits, the edge nothing supports must go", faults.BeforeGraphApplied, faults.Unknown),
		replanAfterDeadLetter("replan-after-dead-letter-graph-applied", "replan-after-dead-letter with the first ingestion's graph written before it died: its conflict re-plans the content under the dead-lettered operationId, never a second plan for one intent", faults.BeforeGraphApplied),
		staleWriterAfterNoop("stale-writer-after-noop-retracted", "stale-writer-after-noop on a document retracted before: a writer re-ingesting it stalls past its lease before its state commit while another instance's retraction finds it retracted already; only the lease can refuse the commit", true, long),
		b.staleHolderRenews(StaleHolderRenewsClass+"-lease-check", faults.BeforeLeaseCheck),
		deadLetterCutShort(DeadLetterCutShortClass+"-failed", "dead-letter-cut-short before the graph write: the ingestion fails for good there (the operation FAILED), and its worker dies before it records the dead letter; nobody resubmits: recovery alone must finish the dead letter", faults.BeforeGraphWrite),
		b.retractionWhilePlanInFlight(RetractionWhilePlanInFlightClass+"-crash", "retraction-while-plan-in-flight with the other document's worker dead before its state commit (its graph written, the operation GRAPH_APPLIED): the retraction must keep the edge the plan in flight needs, and recovery commits it", true),
		retractionSharedEdge("retraction-shared-edge-unknown", "a document is retracted while another still supports one of its edges; the retraction's graph write commits and the worker dies before it learns so", faults.BeforeGraphApplied, faults.Unknown),
	}
	for i := range cases {
		cases[i].TTLMillis = b.ttl
	}
	return cases
}
