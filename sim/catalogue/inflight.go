package catalogue

import (
	"fmt"

	"github.com/crashmatrix/crashmatrix/faults"
)

// Class names of the in-flight classes.
const (
	StaleHolderRenewsClass           = "stale-holder-renews"
	DeadLetterCutShortClass          = "dead-letter-cut-short"
	RetractionWhilePlanInFlightClass = "retraction-while-plan-in-flight"
)

// InFlightClasses are the in-flight classes; each one's second case is
// named after it ("<class>-<how>").
var InFlightClasses = []string{StaleHolderRenewsClass, DeadLetterCutShortClass, RetractionWhilePlanInFlightClass}

// inFlightCases are the classes' first cases.
func (b Builder) inFlightCases() []Case {
	return []Case{
		b.staleHolderRenews(StaleHolderRenewsClass, faults.BeforeGraphWrite),
		deadLetterCutShort(DeadLetterCutShortClass, "after an ingestion completes, another fails for good at its state commit (its graph written, the operation GRAPH_APPLIED); the dead letter is marked pending and reconciled, and the worker dies before it records the dead letter; nobody resubmits: recovery alone must finish the dead letter", faults.BeforeStateCommit),
		b.retractionWhilePlanInFlight(RetractionWhilePlanInFlightClass, "two documents share an edge; the other one's ingestion writes its graph and stalls before its state commit (within its lease) while the first is retracted: the retraction must keep the edge the plan in flight will commit", false),
	}
}

// staleHolderRenews: a holder stalls at stall half a TTL past its lease's
// expiry; meanwhile a competitor is granted the document's lease and
// stalls, within that lease, before its graph write. When the first holder
// wakes, its lease is short, so it asks the store to renew it while the
// competitor's lease is live: the store must refuse it (the lease is held
// by another holder with another token), and the stale holder must write
// nothing more. A renewal that matches the document and a live expiry
// alone renews the competitor's lease for it.
func (b Builder) staleHolderRenews(class string, stall faults.Point) Case {
	late := LeaseBoundaries[2]   // half a TTL after expiry
	inside := LeaseBoundaries[0] // just before expiry
	return Case{ID: "class-" + class, System: faults.Ingestion, Class: class, TTLMillis: b.ttl,
		Description: fmt.Sprintf("a holder stalls %d/%d of the lease TTL at %s; meanwhile a competitor is granted the lease and stalls %d/%d of it before its graph write; the stale holder wakes while the competitor's lease is live and asks the store to renew its own: the store must refuse it (another holder, another token), and it must write nothing more",
			late.Num, late.Den, stall, inside.Num, inside.Den),
		Steps: []Step{
			{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d3", Content: DocD3a}}, Arms: faults.Arms{stall: faults.PauseOn(late.Pause(b), 1)},
				Background: true, ContinueOnError: true, ExpectHit: []faults.Point{stall}, Meanwhile: &Meanwhile{Worker: "competitor", Does: DeedLease}},
			{Worker: "competitor", Actions: []Action{{Do: "ingest", Doc: "d3", Content: DocD3b}}, Arms: faults.Arms{faults.BeforeGraphWrite: faults.PauseOn(inside.Pause(b), 1)},
				Background: true, ContinueOnError: true, ExpectHit: []faults.Point{faults.BeforeGraphWrite}},
			QuiesceStep(faults.Ingestion, "fault", "competitor"),
		}}
}

// deadLetterCutShort: after an ingestion of d4 completes, one of d1 fails
// for good at failAt (its second hit there), and its worker dies before it
// records the dead letter (the failure is marked pending, the graph
// effects reconciled). Its caller never resubmits it: recovery alone must
// find the operation and finish its dead letter.
func deadLetterCutShort(class, desc string, failAt faults.Point) Case {
	return Case{ID: "class-" + class, System: faults.Ingestion, Class: class, Description: desc,
		Steps: []Step{
			{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d4", Content: DocD4}, {Do: "ingest", Doc: "d1", Content: DocD1v1}},
				Arms:      faults.Arms{failAt: faults.On(faults.Permanent, 2), faults.BeforeDeadLetter: faults.On(faults.Crash, 1)},
				ExpectHit: []faults.Point{failAt, faults.BeforeDeadLetter}},
			RecoverStep("recover", nil),
			QuiesceStep(faults.Ingestion),
		}}
}

// retractionWhilePlanInFlight: d2 is ingested; then d1, which shares the
// edge Bob -WORKS_AT-> Acme with it, writes its graph and stops before its
// state commit, stalled within its lease (crashed, when crash is set:
// recovery finishes it, past the graph write); meanwhile d2 is retracted.
// The retraction's deletes and its stale-edge cleanup must count the plan
// in flight as support: when d1 commits, it needs its edge.
func (b Builder) retractionWhilePlanInFlight(class, desc string, crash bool) Case {
	other := Step{Worker: "other", Actions: []Action{{Do: "ingest", Doc: "d1", Content: DocD1v1}}, ContinueOnError: true, ExpectHit: []faults.Point{faults.BeforeStateCommit}}
	steps := []Step{{Worker: "setup", Actions: []Action{{Do: "ingest", Doc: "d2", Content: DocD2}}}}
	if crash {
		other.Arms = faults.Arms{faults.BeforeStateCommit: faults.On(faults.Crash, 1)}
		steps = append(steps, other,
			Step{Worker: "fault", Actions: []Action{{Do: "retract", Doc: "d2"}}},
			RecoverStep("recover", nil))
	} else {
		other.Arms = faults.Arms{faults.BeforeStateCommit: faults.PauseOn(b.ShortPause(), 1)}
		other.Background = true
		other.Meanwhile = &Meanwhile{Worker: "fault", Does: DeedCommit}
		steps = append(steps, other, Step{Worker: "fault", Actions: []Action{{Do: "retract", Doc: "d2"}}})
	}
	return Case{ID: "class-" + class, System: faults.Ingestion, Class: class, TTLMillis: b.ttl, Description: desc,
		Steps: append(steps, QuiesceStep(faults.Ingestion, "other"))}
}
