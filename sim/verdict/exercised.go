package verdict

import (
	"fmt"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// Cause classifies why a case was not exercised: the remedy differs.
type Cause string

// The causes of a case not exercised.
const (
	// CauseTiming: the worker ran out of time before the window (it lost
	// its lease after a slow step, timed out waiting for a lease, or hit
	// its deadline). A slower machine or a longer lease TTL changes it.
	CauseTiming Cause = "timing"
	// CauseUnreachable: the worker finished, or stopped at an error,
	// without passing the failpoint. More time does not change it: the
	// code path or the case's script does not lead there.
	CauseUnreachable Cause = "unreachable"
	// CauseNotKilled: the crash fired but the worker did not die by it.
	CauseNotKilled Cause = "not-killed"
	// CauseKillMissed: a random-instant kill came after its worker had
	// already finished (the instant is drawn from a measured run; this
	// one was faster).
	CauseKillMissed Cause = "kill-missed"
	// CauseServerFault: a server fault was asked for but never took effect
	// (no matching traffic after the window, or the restart failed).
	CauseServerFault Cause = "server-fault"
	// CauseInterleaving: every fault fired, but what another worker had to
	// do while a worker stalled (Step.Meanwhile) did not land inside the
	// stall: the case did not test what it names.
	CauseInterleaving Cause = "interleaving"
	// CauseDataElsewhere: a power loss of an embedded backend fired, but
	// the case's lazy mount held no file of the store's: its data is
	// elsewhere, and the power loss could not lose any of it.
	CauseDataElsewhere Cause = "data-elsewhere"
	// CauseNothingToTear: a torn power loss (faults.TornWrite) fired, but
	// the store had nothing written and not synced to tear: it was a plain
	// power loss.
	CauseNothingToTear Cause = "nothing-to-tear"
	// CauseNothingCompleted: every fault fired, but after recovery no
	// operation had completed, so the checks had nothing to judge.
	CauseNothingCompleted Cause = "nothing-completed"
)

// Causes lists every cause, in the order above (docs/ci.md names each).
var Causes = []Cause{CauseTiming, CauseUnreachable, CauseNotKilled, CauseKillMissed, CauseServerFault,
	CauseInterleaving, CauseDataElsewhere, CauseNothingToTear, CauseNothingCompleted}

// Settled reports whether running the case again cannot change the
// cause: the store keeps its data off the lazy mount, or had nothing
// un-synced to tear at the window, however often the case runs. A
// database server writes in the background (its checkpointer, its
// statistics), so what it left un-synced at a window changes from run to
// run: on a server nothing-to-tear is not settled (server).
func (c Cause) Settled(server bool) bool {
	return c == CauseDataElsewhere || c == CauseNothingToTear && !server
}

// NotExercisedReason says why a case did not exercise its fault, and what a
// person can do about it.
type NotExercisedReason struct {
	Cause  Cause  `json:"cause"`
	Detail string `json:"detail"`
	Advice string `json:"advice"`
}

// Attempt is one earlier run of a case that was not exercised.
type Attempt struct {
	LeaseTTL time.Duration      `json:"leaseTtl"`
	Reason   NotExercisedReason `json:"reason"`
}

// TimingAdvice is what to do about a case that ran out of time.
func TimingAdvice(tm catalogue.Timing) string {
	return fmt.Sprintf("the machine was too slow for the lease TTL %s (step latency above half of it); rerun on a quieter machine, or fix a longer TTL with --lease-ttl %s", tm.LeaseTTL, 4*tm.LeaseTTL)
}

const unreachableAdvice = "check that the failpoint is still on the code path (faults catalogue, reference service) and that the case's script leads there: this can mean the code path changed. With the reference service unchanged, suspect the stores: a store whose reads steer the service elsewhere (ListRecoverable leaving an operation out, a read answering wrongly) keeps it from the window; run the conformance suites (properties.Stores, or certify's conformance with --store-cmd)"

const StoreErrorAdvice = "the error kept the worker off the window: if it is the store's (a failing statement, an unsupported file operation), fix the store; its output is kept in the case's folder"

// WhyNotHit explains why point p never fired in step i's worker.
func WhyNotHit(h history.Log, i int, st catalogue.Step, p faults.Point, wr *WorkerResult, tm catalogue.Timing) NotExercisedReason {
	var started bool
	var exit, lastErr string
	for _, r := range h {
		if r.Worker != st.Worker || r.Phase != i {
			continue
		}
		switch r.Kind {
		case history.Start:
			started = true
		case history.Exit:
			exit = r.Reason
		case history.Result:
			if r.Err != "" {
				lastErr = r.Err
			}
		case history.Event:
			if r.Event != nil && r.Event.Kind == reference.EvLeaseLost {
				return NotExercisedReason{Cause: CauseTiming, Advice: TimingAdvice(tm),
					Detail: fmt.Sprintf("worker %s lost its lease on %s before reaching %s: a step took more than half the lease TTL %s", st.Worker, r.Event.DocumentID, p, tm.LeaseTTL)}
			}
		}
	}
	timingErr := func(e string) bool {
		for _, te := range []error{reference.ErrLockTimeout, reference.ErrLeaseLost, reference.ErrLeaseHeld} {
			if strings.Contains(e, te.Error()) {
				return true
			}
		}
		return false
	}
	switch {
	case wr != nil && wr.Exit == "timeout":
		return NotExercisedReason{Cause: CauseTiming, Advice: TimingAdvice(tm),
			Detail: fmt.Sprintf("worker %s hit its deadline of %s before reaching %s", st.Worker, tm.ProcessTimeout, p)}
	case lastErr != "" && timingErr(lastErr):
		return NotExercisedReason{Cause: CauseTiming, Advice: TimingAdvice(tm),
			Detail: fmt.Sprintf("worker %s gave up before reaching %s: %s", st.Worker, p, lastErr)}
	case !started:
		return NotExercisedReason{Cause: CauseTiming, Advice: TimingAdvice(tm),
			Detail: fmt.Sprintf("worker %s never started its work (exit %q)", st.Worker, exitOf(wr))}
	case exit == "done" && lastErr != "":
		return NotExercisedReason{Cause: CauseUnreachable, Advice: StoreErrorAdvice,
			Detail: fmt.Sprintf("worker %s ran all %d actions without passing %s; an action failed: %s", st.Worker, len(st.Actions), p, lastErr)}
	case exit == "done":
		return NotExercisedReason{Cause: CauseUnreachable, Advice: unreachableAdvice,
			Detail: fmt.Sprintf("worker %s ran all %d actions without passing %s", st.Worker, len(st.Actions), p)}
	case lastErr != "":
		return NotExercisedReason{Cause: CauseUnreachable, Advice: StoreErrorAdvice,
			Detail: fmt.Sprintf("worker %s stopped at an error before reaching %s: %s", st.Worker, p, lastErr)}
	default:
		return NotExercisedReason{Cause: CauseUnreachable, Advice: unreachableAdvice,
			Detail: fmt.Sprintf("worker %s ended (exit %q) before reporting a hit of %s", st.Worker, exitOf(wr), p)}
	}
}

func exitOf(wr *WorkerResult) string {
	if wr == nil {
		return "unknown"
	}
	return wr.Exit
}

// NothingCompleted explains a case in which no operation completed: if a
// worker lost a lease or timed out waiting for one, time ran out.
func NothingCompleted(h history.Log, tm catalogue.Timing) *NotExercisedReason {
	for _, r := range h {
		lost := r.Kind == history.Event && r.Event != nil && r.Event.Kind == reference.EvLeaseLost
		if lost || (r.Err != "" && strings.Contains(r.Err, reference.ErrLockTimeout.Error())) {
			return &NotExercisedReason{Cause: CauseTiming, Advice: TimingAdvice(tm),
				Detail: fmt.Sprintf("no operation reached COMPLETED after recovery, and worker %s ran out of lease time", r.Worker)}
		}
	}
	return &NotExercisedReason{Cause: CauseNothingCompleted,
		Detail: "no operation reached COMPLETED after recovery: the case's workers did too little for the checks to judge",
		Advice: "look at the case's history: its script or its faults stop every operation before completion"}
}

// InterleavingMissed checks each stalled step's Meanwhile against the
// history: the other worker's deed must come after the stall began (the
// stalled worker's first pause hit) and before the stalled worker's next
// record (it woke, or it ended). nil when every one landed.
func InterleavingMissed(c catalogue.Case, h history.Log, tm catalogue.Timing) *NotExercisedReason {
	for i, st := range c.Steps {
		m := st.Meanwhile
		if m == nil {
			continue
		}
		begin := -1
		for j, r := range h {
			if r.Worker == st.Worker && r.Phase == i && r.Kind == history.Hit && r.Fault != nil && r.Fault.Kind == faults.Pause {
				begin = j
				break
			}
		}
		if begin < 0 {
			return &NotExercisedReason{Cause: CauseInterleaving, Advice: unreachableAdvice,
				Detail: fmt.Sprintf("worker %s never stalled, so %s could not %s meanwhile", st.Worker, m.Worker, m.Does)}
		}
		end := len(h)
		for j := begin + 1; j < len(h); j++ {
			if h[j].Worker == st.Worker && h[j].Phase == i {
				end = j
				break
			}
		}
		landed, after := false, -1
		for j := begin + 1; j < len(h); j++ {
			if m.Does.Did(h[j], m.Worker) {
				if j < end {
					landed = true
				} else if after < 0 {
					after = j
				}
				break
			}
		}
		if landed {
			continue
		}
		when := "never did"
		if after >= 0 {
			when = "did only after " + st.Worker + " woke"
		}
		return &NotExercisedReason{Cause: CauseInterleaving, Advice: TimingAdvice(tm),
			Detail: fmt.Sprintf("%s had to %s while %s stalled at %s, and %s: the case did not test what it names", m.Worker, m.Does, st.Worker, h[begin].Point, when)}
	}
	return nil
}

// RecrashNotApplicable is the note of a recrash case at a store-declared
// window whose second crash cannot happen (RecrashWithoutReturn).
const RecrashNotApplicable = "a recrash at a window the store declared, where recovery never comes back: the first crash there left recovery nothing to redo at this window (its operation had ended, or nothing durable was left to resume), so no second crash can happen there; the crash case at the same window covers the first"

// RecrashWithoutReturn reports whether c is a recrash at a store-declared
// window whose first crash fired, and whose recover-crash worker then ran
// its recovery to the end, or to an error, without coming back to the
// window. A catalogue window declares the kinds that apply to it; a store
// window gets every store kind, and only the run can tell that recovery
// does not pass it again (a claim released after the operation completed,
// a thread's first checkpoint). Such a case is not applicable: it is
// neither a pass nor a window the harness failed to reach.
func RecrashWithoutReturn(c catalogue.Case, h history.Log) bool {
	if !c.Store || c.Kind != faults.Recrash {
		return false
	}
	first := false
	for _, st := range c.Steps {
		if st.Worker == catalogue.RecrashWorker {
			break
		}
		if _, armed := st.Arms[c.Point]; armed && h.HitBy(st.Worker, c.Point) {
			first = true
		}
	}
	if !first || h.HitBy(catalogue.RecrashWorker, c.Point) {
		return false
	}
	ended := false
	for _, r := range h {
		if r.Worker == catalogue.RecrashWorker && r.Kind == history.Exit && r.Reason == "done" {
			ended = true
		}
	}
	return ended
}
