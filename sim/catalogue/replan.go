package catalogue

import (
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
)

// ReplanResumeClass is the case class where the re-plan of an operation
// that lost its revision race is made, its maker dies before the old
// operation is abandoned, and the old operation's caller resumes it later.
const ReplanResumeClass = "resume-after-replan"

// replanCases are the classes of a conflict handled twice at two times:
// an old plan of d3 loses its revision race to a competitor; recovery
// detects the conflict, makes the re-plan (a new operation for the same
// content on top of the competitor's revision) and dies before it abandons
// the old operation; then the old operation's caller resumes it. The
// caller has to wait out the dead worker's lease first, so its conflict
// handling runs at a later time than the first one on every run (the
// harness clock moves while a worker waits for a lease): a re-plan whose
// operationId depends on the time of the attempt is a second operation,
// and a second frozen plan, for one intent (I1). With a time-free
// operationId the caller finds the re-plan and runs it. The two cases
// die at two windows, so that neither catch rests on one case: right
// after the re-plan's creation (unknown at conflictBeforeReplan), and at
// the abandon (crash at conflictBeforeAbandon). The library scenario
// mutant-replan-id-per-attempt is the first.
//
// Recovery alone cannot show it: the dead worker's claim on the old
// operation keeps the next round off it, so the round runs the re-plan
// first, and the old operation then finds the document already holding
// its content (a NO_OP re-plan under any operationId).
func (b Builder) replanCases() []Case {
	dies := []struct {
		class string
		point faults.Point
		kind  faults.Kind
		how   string
	}{
		{ReplanResumeClass, faults.ConflictBeforeReplan, faults.Unknown, "makes the re-plan and dies before it learns so"},
		{ReplanResumeClass + "-crash", faults.ConflictBeforeAbandon, faults.Crash, "makes the re-plan and dies before it abandons the old operation"},
	}
	out := make([]Case, 0, len(dies))
	for _, d := range dies {
		out = append(out, Case{ID: "class-" + d.class, System: faults.Ingestion, Class: d.class, TTLMillis: b.ttl,
			Description: "an old plan of d3 loses its revision race; recovery detects the conflict, " + d.how + "; the old operation's caller resumes it once the dead worker's lease is gone, at a later time: it must find the re-plan and run it, not make a second one for the same intent",
			Steps: []Step{
				{Worker: "setup", Actions: []Action{{Do: "ingest", Doc: "d3", Op: "d3-op", Content: DocD3a}}, Arms: faults.Arms{faults.BeforeGraphApplied: faults.On(faults.Crash, 1)}, ExpectHit: []faults.Point{faults.BeforeGraphApplied}},
				{Worker: "competitor", Actions: []Action{{Do: "ingest", Doc: "d3", Content: DocD3b}}},
				{Worker: "fault", Actions: []Action{{Do: "recover", Rounds: 3}}, Arms: faults.Arms{d.point: faults.On(d.kind, 1)}, ExpectHit: []faults.Point{d.point}, ContinueOnError: true},
				// The caller's hit at conflictBeforeReplan (a stall of a
				// millisecond) is the evidence that its resume handled
				// the conflict again, after the re-plan was made.
				{Worker: "caller", Actions: []Action{{Do: "resume", Op: "d3-op"}}, Arms: faults.Arms{faults.ConflictBeforeReplan: faults.PauseOn(time.Millisecond, 1)},
					ExpectHit: []faults.Point{faults.ConflictBeforeReplan}, ContinueOnError: true},
				QuiesceStep(faults.Ingestion, "setup"),
			}})
	}
	return out
}
