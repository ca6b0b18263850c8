package sim

import (
	"fmt"

	"github.com/crashmatrix/crashmatrix/faults"
)

// SecondCases are the natural second case of the classes that were the
// only ones to catch a mutant (properties' TestMutantCatchesRestOnMoreThanOneCase
// counts them), so that a timing change in one case cannot lose it: the
// same interleaving at another window or under another kind.
func SecondCases(leaseTTLMillis int64) []Case {
	stale := faults.PauseOn(StaleStall(leaseTTLMillis), 1)
	justAfter := LeaseBoundaries[1] // just after expiry
	cases := []Case{
		{ID: "class-split-brain-same-intent-expire", System: faults.Ingestion, Class: "split-brain-same-intent-expire",
			Description: "split-brain-same-intent under early expiry: the first holder's lease is forgotten by the store; it asked the model and stalls before freezing its plan while the second, granted the lease, asks the model again, freezes the other answer and dies; the first must not run its own plan under the frozen operation",
			Steps: []Step{
				{Worker: "holder", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}}, Arms: faults.Arms{faults.LeaseAcquire: faults.On(faults.Expire, 1), faults.BeforePrepare: stale},
					Background: true, ContinueOnError: true, ExpectHit: []faults.Point{faults.LeaseAcquire, faults.BeforePrepare}, Meanwhile: &Meanwhile{Worker: "fault", Does: DeedFreeze}},
				{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}},
					Arms: faults.Arms{faults.BeforeGraphWrite: faults.On(faults.Crash, 1)}, ExpectHit: []faults.Point{faults.BeforeGraphWrite}},
				quiesceStep(faults.Ingestion, "holder", "fault"),
			}},
		{ID: "class-lease-" + justAfter.Name + "-between-batches", System: faults.Ingestion, Class: "lease-" + justAfter.Name + "-between-batches",
			Description: fmt.Sprintf("a writer stalls %d/%d of the lease TTL between two graph batches while recovery takes the document over; a stale holder must be refused by the store before its next batch", justAfter.Num, justAfter.Den),
			Steps: []Step{
				{Worker: "fault", Actions: StandardScript(), Arms: faults.Arms{faults.BetweenGraphBatches: faults.PauseOn(justAfter.Pause(leaseTTLMillis), 1)},
					Background: true, ContinueOnError: true, ExpectHit: []faults.Point{faults.BetweenGraphBatches}, Meanwhile: &Meanwhile{Worker: "recover", Does: DeedLease}},
				recoverStep("recover", nil),
				quiesceStep(faults.Ingestion, "fault"),
			}},
		{ID: "class-resubmit-after-failure-graph-applied", System: faults.Ingestion, Class: "resubmit-after-failure-graph-applied",
			Description: "resubmit-after-failure past the graph write: the registry save fails with a retryable error (the operation stays GRAPH_APPLIED with one attempt recorded); the caller's resubmission must keep the operationId and its frozen plan",
			Steps: []Step{
				{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}}, Arms: faults.Arms{faults.BeforeRegistrySave: faults.On(faults.Transient, 1)}, ExpectHit: []faults.Point{faults.BeforeRegistrySave}},
				{Worker: "resubmit", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}}, ContinueOnError: true},
				quiesceStep(faults.Ingestion),
			}},
		{ID: "class-reingest-after-retraction-graph-applied", System: faults.Ingestion, Class: "reingest-after-retraction-graph-applied",
			Description: "reingest-after-retraction with the other document's crash at another window (its graph write committed, its stage not advanced): re-ingesting the retracted content must leave the document ACTIVE, not answer NO_OP",
			Steps: []Step{
				{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}, {Do: "retract", Doc: "d1"}, {Do: "ingest", Doc: "d2", Content: DocD2}},
					Arms: faults.Arms{faults.BeforeGraphApplied: faults.On(faults.Crash, 3)}, ExpectHit: []faults.Point{faults.BeforeGraphApplied}},
				{Worker: "again", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}}, ContinueOnError: true},
				quiesceStep(faults.Ingestion, "fault"),
			}},
		{ID: "class-retraction-shared-edge-unknown", System: faults.Ingestion, Class: "retraction-shared-edge-unknown",
			Description: "a document is retracted while another still supports one of its edges; the retraction's graph write commits and the worker dies before it learns so",
			Steps: []Step{
				{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}, {Do: "ingest", Doc: "d2", Content: DocD2}, {Do: "retract", Doc: "d1"}},
					Arms: faults.Arms{faults.BeforeGraphApplied: faults.On(faults.Unknown, 3)}, ExpectHit: []faults.Point{faults.BeforeGraphApplied}},
				recoverStep("recover", nil),
				quiesceStep(faults.Ingestion, "fault"),
			}},
	}
	for i := range cases {
		cases[i].TTLMillis = leaseTTLMillis
	}
	return cases
}
