package catalogue

import (
	"github.com/crashmatrix/crashmatrix/faults"
)

// operationIDReused: an ingestion under a caller's operationId meets
// fault k at p; the caller then submits other content under it.
func operationIDReused(class, desc string, p faults.Point, k faults.Kind) Case {
	return Case{ID: "class-" + class, System: faults.Ingestion, Class: class, Description: desc,
		Steps: []Step{
			{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Op: "reused-op", Content: DocD1v1}}, Arms: faults.Arms{p: faults.On(k, 1)}, ExpectHit: []faults.Point{p}},
			{Worker: "other-content", Actions: []Action{{Do: "ingest", Doc: "d1", Op: "reused-op", Content: DocD1v2}}, ContinueOnError: true},
			QuiesceStep(faults.Ingestion, "fault"),
		}}
}

// retractAgain: d1 is ingested, retracted, ingested and retracted again,
// then d2's ingestion crashes at p (its fifth operation).
func retractAgain(class, desc string, p faults.Point) Case {
	return Case{ID: "class-" + class, System: faults.Ingestion, Class: class, Description: desc,
		Steps: []Step{
			{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}, {Do: "retract", Doc: "d1"}, {Do: "ingest", Doc: "d1", Content: DocD1v2}, {Do: "retract", Doc: "d1"}, {Do: "ingest", Doc: "d2", Content: DocD2}},
				Arms: faults.Arms{p: faults.On(faults.Crash, 5)}, ExpectHit: []faults.Point{p}},
			QuiesceStep(faults.Ingestion, "fault"),
		}}
}

// entityVariants: two documents spell Alice and Acme in other case; the
// first stalls (stall) at p, before its registry save, while the second
// commits.
func entityVariants(class, desc string, p faults.Point, stall faults.Action) Case {
	return Case{ID: "class-" + class, System: faults.Ingestion, Class: class, Description: desc,
		Steps: []Step{
			{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d5", Content: DocVariantsA}}, Arms: faults.Arms{p: stall}, Background: true,
				ExpectHit: []faults.Point{p}, Meanwhile: &Meanwhile{Worker: "other", Does: DeedCommit}},
			{Worker: "other", Actions: []Action{{Do: "ingest", Doc: "d6", Content: DocVariantsB}}, ContinueOnError: true},
			QuiesceStep(faults.Ingestion, "fault", "other"),
		}}
}

// retractionSharedEdgeCrossed: d1 and d2 share an edge; d2's retraction
// meets fault k at p (after its graph write, before its state commit)
// while d1 is retracted; the quiesce step finishes d2's retraction.
func retractionSharedEdgeCrossed(class, desc string, p faults.Point, k faults.Kind) Case {
	return Case{ID: "class-" + class, System: faults.Ingestion, Class: class, Description: desc,
		Steps: []Step{
			{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}, {Do: "ingest", Doc: "d2", Content: DocD2}, {Do: "retract", Doc: "d2"}},
				Arms: faults.Arms{p: faults.On(k, 3)}, ExpectHit: []faults.Point{p}},
			{Worker: "other", Actions: []Action{{Do: "retract", Doc: "d1"}}},
			QuiesceStep(faults.Ingestion, "fault"),
		}}
}

// replanAfterDeadLetter: d3a's ingestion crashes at p; d3b commits; d3a is
// ingested again on that revision and fails for good; the quiesce step
// resubmits the first, whose conflict re-plans.
func replanAfterDeadLetter(class, desc string, p faults.Point) Case {
	return Case{ID: "class-" + class, System: faults.Ingestion, Class: class, Description: desc,
		Steps: []Step{
			{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d3", Content: DocD3a}}, Arms: faults.Arms{p: faults.On(faults.Crash, 1)}, ExpectHit: []faults.Point{p}},
			{Worker: "competitor", Actions: []Action{{Do: "ingest", Doc: "d3", Content: DocD3b}}},
			{Worker: "again", Actions: []Action{{Do: "ingest", Doc: "d3", Content: DocD3a}}, Arms: faults.Arms{faults.BeforeGraphWrite: faults.On(faults.Permanent, 1)},
				ExpectHit: []faults.Point{faults.BeforeGraphWrite}, ContinueOnError: true},
			QuiesceStep(faults.Ingestion, "fault", "again"),
		}}
}

// staleWriterAfterNoop: a writer stalls (stall) before its state commit
// while another instance holds the lease for a retraction that changes
// nothing: d1 absent, or (retracted) already retracted by the writer.
func staleWriterAfterNoop(class, desc string, retracted bool, stall faults.Action) Case {
	acts, hit := []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}}, 1
	if retracted {
		acts, hit = []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}, {Do: "retract", Doc: "d1"}, {Do: "ingest", Doc: "d1", Content: DocD1v2}}, 3
	}
	stall.Hit = hit
	return Case{ID: "class-" + class, System: faults.Ingestion, Class: class, Description: desc,
		Steps: []Step{
			{Worker: "fault", Actions: acts, Arms: faults.Arms{faults.BeforeStateCommit: stall}, Background: true, ContinueOnError: true,
				ExpectHit: []faults.Point{faults.BeforeStateCommit}, Meanwhile: &Meanwhile{Worker: "noop", Does: DeedLease}},
			{Worker: "noop", Actions: []Action{{Do: "retract", Doc: "d1"}}},
			QuiesceStep(faults.Ingestion, "fault"),
		}}
}
