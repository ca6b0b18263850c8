package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

func ev(w string, phase int, kind string, at int64) history.Record {
	return history.Record{Worker: w, Phase: phase, Kind: history.Event, Event: &reference.Event{Kind: kind, At: at}}
}

// Step latency is measured between consecutive steps of one worker; waits
// that belong to the case (a pause after a hit, waiting for a lease, the
// refusal after a stall) are not steps.
func TestStepLatenciesLeaveOutWaits(t *testing.T) {
	h := history.Log{
		ev("a", 0, reference.EvInvoke, 0),
		ev("a", 0, reference.EvLeaseAcquire, 900), // waited for a killed worker's lease
		ev("a", 0, reference.EvModelCall, 910),
		ev("b", 1, reference.EvInvoke, 915), // another worker interleaves
		ev("a", 0, reference.EvPrepared, 930),
		{Worker: "a", Phase: 0, Kind: history.Hit, Point: faults.BeforeGraphWrite},
		ev("a", 0, reference.EvLeaseLost, 2000), // woke from a pause
		ev("b", 1, reference.EvLeaseAcquire, 916),
		ev("b", 1, reference.EvModelCall, 966),
		ev("b", 1, reference.EvLeaseLost, 1066), // a slow step cost the lease: it counts
	}
	got := stepLatencies(h)
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
	if len(got) != len(want) {
		t.Fatalf("latencies %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("latencies %v, want %v", got, want)
		}
	}
	med, p99, mx := verdict.LatencyStats(got)
	if med != 50*time.Millisecond || p99 != 100*time.Millisecond || mx != 100*time.Millisecond {
		t.Fatalf("stats %s %s %s", med, p99, mx)
	}
}

// The TTL is never below the configured floor, grows with the slowest
// steps, is capped, and is rounded up to 50ms.
func TestTTLForFollowsStepLatency(t *testing.T) {
	base := 250 * time.Millisecond
	for _, c := range []struct {
		p99, max, want time.Duration
	}{
		{5 * time.Millisecond, 30 * time.Millisecond, 250 * time.Millisecond},
		{80 * time.Millisecond, 70 * time.Millisecond, 350 * time.Millisecond},  // 4 x p99 = 320 -> 350
		{60 * time.Millisecond, 210 * time.Millisecond, 650 * time.Millisecond}, // 3 x max = 630 -> 650
		{time.Second, 20 * time.Second, 40 * base},                              // capped
	} {
		if got := ttlFor(base, c.p99, c.max); got != c.want {
			t.Errorf("ttlFor(%s, p99 %s, max %s) = %s, want %s", base, c.p99, c.max, got, c.want)
		}
	}
	tm := catalogue.Timing{LeaseTTL: base, ClaimTTL: base + 50*time.Millisecond, ProcessTimeout: 30 * time.Second}.WithTTL(time.Second, false)
	if tm.ClaimTTL != time.Second+50*time.Millisecond || tm.ProcessTimeout != 60*time.Second || tm.LongPause() != 2100*time.Millisecond {
		t.Fatalf("derived timing %+v, long pause %s", tm, tm.LongPause())
	}
}

// A case's pauses keep their relation to the lease when the TTL changes.
func TestCaseForTTLRescalesPauses(t *testing.T) {
	c, ok := catalogue.Lease(250*time.Millisecond).WindowCase(faults.BeforeStateCommit, faults.Pause)
	if !ok {
		t.Fatal("no pause case at beforeStateCommit")
	}
	if got := c.Steps[0].Arms[faults.BeforeStateCommit].String(); got != "pause:600@1" {
		t.Fatalf("arm %q, want pause:600@1", got)
	}
	d := c.ForTTL(time.Second)
	if got := d.Steps[0].Arms[faults.BeforeStateCommit].String(); got != "pause:2400@1" {
		t.Fatalf("rescaled arm %q, want pause:2400@1 (still past twice the lease)", got)
	}
	if c.Steps[0].Arms[faults.BeforeStateCommit].String() != "pause:600@1" {
		t.Fatal("ForTTL changed the original case")
	}
	if d.TTLMillis != 1000 {
		t.Fatalf("TTLMillis %d", d.TTLMillis)
	}
	crash, _ := catalogue.Lease(250*time.Millisecond).WindowCase(faults.BeforeStateCommit, faults.Crash)
	if got := crash.ForTTL(time.Second).Steps[0].Arms[faults.BeforeStateCommit].String(); got != "crash@1" {
		t.Fatalf("a crash arm became %q", got)
	}
}

// Not exercised says whether time ran out or the point was never on the
// path, and what to do.
func TestWhyNotHitTellsTimingFromUnreachable(t *testing.T) {
	tm := catalogue.Timing{LeaseTTL: 250 * time.Millisecond, ProcessTimeout: 30 * time.Second}
	st := catalogue.Step{Worker: "fault", Actions: catalogue.StandardScript()}
	p := faults.BeforeStateCommitted
	start := history.Record{Worker: "fault", Kind: history.Start}
	for _, c := range []struct {
		name string
		h    history.Log
		wr   *verdict.WorkerResult
		want verdict.Cause
		text string
	}{
		{"lease lost", history.Log{start, {Worker: "fault", Kind: history.Event, Event: &reference.Event{Kind: reference.EvLeaseLost, DocumentID: "d4"}}}, &verdict.WorkerResult{Exit: "ok"}, verdict.CauseTiming, "lost its lease on d4"},
		{"lease wait", history.Log{start, {Worker: "fault", Kind: history.Result, Err: "lease s/d4 held by x: " + reference.ErrLockTimeout.Error()}}, &verdict.WorkerResult{Exit: "ok"}, verdict.CauseTiming, "gave up"},
		{"deadline", history.Log{start}, &verdict.WorkerResult{Exit: "timeout"}, verdict.CauseTiming, "deadline of 30s"},
		{"finished", history.Log{start, {Worker: "fault", Kind: history.Exit, Reason: "done"}}, &verdict.WorkerResult{Exit: "ok"}, verdict.CauseUnreachable, "ran all 5 actions without passing"},
		{"error", history.Log{start, {Worker: "fault", Kind: history.Result, Err: "boom"}, {Worker: "fault", Kind: history.Exit, Reason: "stopped after a failed action"}}, &verdict.WorkerResult{Exit: "ok"}, verdict.CauseUnreachable, "stopped at an error"},
		{"finished after an error", history.Log{start, {Worker: "fault", Kind: history.Result, Err: "link: operation not supported"}, {Worker: "fault", Kind: history.Exit, Reason: "done"}}, &verdict.WorkerResult{Exit: "ok"}, verdict.CauseUnreachable, "an action failed: link: operation not supported"},
		{"died", history.Log{start}, &verdict.WorkerResult{Exit: "killed (SIGKILL)"}, verdict.CauseUnreachable, "ended (exit \"killed (SIGKILL)\")"},
		{"another phase", history.Log{{Worker: "fault", Phase: 3, Kind: history.Event, Event: &reference.Event{Kind: reference.EvLeaseLost}}, start, {Worker: "fault", Kind: history.Exit, Reason: "done"}}, &verdict.WorkerResult{Exit: "ok"}, verdict.CauseUnreachable, "ran all"},
	} {
		got := verdict.WhyNotHit(c.h, 0, st, p, c.wr, tm)
		if got.Cause != c.want || !strings.Contains(got.Detail, c.text) || got.Advice == "" {
			t.Errorf("%s: got %+v, want cause %s and detail containing %q", c.name, got, c.want, c.text)
		}
	}
}

// A case not exercised for lack of time says so and what to do, instead
// of suggesting that the code path changed; one whose point was never
// reached says the code path may have changed.
func TestWhyNotExercisedNamesTheCause(t *testing.T) {
	note := "failpoint beforeCompleted never fired in worker fault"
	timing := verdict.CaseResult{Verdict: verdict.NotExercised, Notes: []string{note},
		NotExercised: &verdict.NotExercisedReason{Cause: verdict.CauseTiming, Detail: "the worker lost its lease", Advice: "rerun with --lease-ttl 2s"}}
	got := timing.WhyNotExercised()
	for _, want := range []string{note, "timing: the worker lost its lease", "what to do: rerun with --lease-ttl 2s"} {
		if !strings.Contains(got, want) {
			t.Errorf("timing: %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "code path changed") {
		t.Errorf("timing: %q blames the code path", got)
	}
	unreachable := verdict.CaseResult{Verdict: verdict.NotExercised, Notes: []string{note}, NotExercised: &verdict.NotExercisedReason{Cause: verdict.CauseUnreachable}}
	if got := unreachable.WhyNotExercised(); got != note+", which can mean the code path changed" {
		t.Errorf("unreachable: %q", got)
	}
	// A store that failed every write (a Node store's link(2) on the lazy
	// file system) is named, not hidden behind "the code path changed".
	failed := verdict.CaseResult{Verdict: verdict.NotExercised, Notes: []string{note}, NotExercised: &verdict.NotExercisedReason{Cause: verdict.CauseUnreachable,
		Detail: "worker fault ran all 5 actions without passing beforeCompleted; an action failed: link: operation not supported", Advice: verdict.StoreErrorAdvice}}
	if got := failed.WhyNotExercised(); !strings.Contains(got, "link: operation not supported") || !strings.Contains(got, "fix the store") {
		t.Errorf("store error: %q", got)
	}
}

// An undecided case whose worker was killed at the deadline of a timing
// the run has since raised is a timing problem (run again with the raised
// timing); a hang under the current timing, or an undecided case without
// a timeout, is not.
func TestHungUnderOldTimingIsTiming(t *testing.T) {
	old := catalogue.Timing{LeaseTTL: 1500 * time.Millisecond, ProcessTimeout: 90 * time.Second}
	raised := old.WithTTL(24*time.Second, false)
	hung := verdict.CaseResult{Verdict: verdict.Undecided, Workers: []verdict.WorkerResult{{Worker: "fault", Exit: "ok"}, {Worker: "recover", Exit: "timeout"}}}
	why, ok := hungUnderOldTiming(hung, old, raised)
	if !ok || why.Cause != verdict.CauseTiming || !strings.Contains(why.Detail, "worker recover") || !strings.Contains(why.Detail, "1m30s") || why.Advice == "" {
		t.Fatalf("hung under a since-raised timing: %+v, %v; want a timing reason naming the worker and the old deadline", why, ok)
	}
	if _, ok := hungUnderOldTiming(hung, raised, raised); ok {
		t.Error("a hang under the current timing was taken for a timing problem")
	}
	other := verdict.CaseResult{Verdict: verdict.Undecided, Workers: []verdict.WorkerResult{{Worker: "fault", Exit: "error: exit status 2"}}}
	if _, ok := hungUnderOldTiming(other, old, raised); ok {
		t.Error("an undecided case without a timeout was taken for a timing problem")
	}
	failed := verdict.CaseResult{Verdict: verdict.Fail, Workers: []verdict.WorkerResult{{Worker: "fault", Exit: "timeout"}}}
	if _, ok := hungUnderOldTiming(failed, old, raised); ok {
		t.Error("a failed case was retried")
	}
}

// An undecided case whose worker hung past its deadline on a server is
// run once more (a loaded server stalls and goes on); a case undecided for
// another reason is not.
func TestHungOnServerIsRunAgain(t *testing.T) {
	tm := catalogue.Timing{LeaseTTL: time.Second, ProcessTimeout: 5 * time.Minute}
	hung := verdict.CaseResult{Verdict: verdict.Undecided, Workers: []verdict.WorkerResult{{Worker: "recover", Exit: "timeout"}}}
	why, ok := hungOnServer(hung, tm)
	if !ok || why.Cause != verdict.CauseTiming || !strings.Contains(why.Detail, "worker recover hung past its 5m0s deadline") {
		t.Fatalf("hungOnServer = %+v, %v", why, ok)
	}
	for _, res := range []verdict.CaseResult{
		{Verdict: verdict.Undecided, Workers: []verdict.WorkerResult{{Worker: "w", Exit: "error: exit status 3"}}},
		{Verdict: verdict.Pass, Workers: []verdict.WorkerResult{{Worker: "w", Exit: "timeout"}}},
	} {
		if _, ok := hungOnServer(res, tm); ok {
			t.Errorf("%+v counted as a stalled server", res)
		}
	}
	if (Backend{Embedded: true}).ServerBacked() || (Backend{Volatile: true}).ServerBacked() || !(Backend{Name: "postgres"}).ServerBacked() {
		t.Error("serverBacked: only a backend neither embedded nor volatile keeps its stores in servers")
	}
}

// A fixed lease TTL on the wall clock must cover twice the longest step
// the calibration measured, counted up to the millisecond the history
// times it to: a shorter one (--wall-clock --lease-ttl 1ms gave NOT
// CERTIFIED with I3 and I5 on the reference) is an error naming the step
// and the TTL to raise it to. Adaptive runs, the harness clock and the
// in-process mode have nothing to check.
func TestFixedTTLMustCoverTheMeasuredSteps(t *testing.T) {
	wall := &Runner{cfg: Config{WallClock: true}}
	slow := step{took: 12 * time.Millisecond, ended: reference.EvPrepared}
	err := wall.fixedTTLCovers(10*time.Millisecond, 3*time.Millisecond, slow, false)
	short, ok := err.(*TTLTooShortError)
	if !ok {
		t.Fatalf("TTL 10ms over a 12ms step: %v, want a TTLTooShortError", err)
	}
	if short.Longest != 13*time.Millisecond || short.Need != 50*time.Millisecond || short.Ended != reference.EvPrepared {
		t.Fatalf("%+v: want the step up to 13ms, ended in prepared, and a TTL of at least 50ms (3 x 13ms, rounded up)", short)
	}
	for _, want := range []string{"lease TTL 10ms is shorter than the steps it must cover", "steps of up to 13ms", "worker's prepared event", "raise --lease-ttl to at least 50ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if err := wall.fixedTTLCovers(26*time.Millisecond, 3*time.Millisecond, slow, false); err != nil {
		t.Errorf("TTL 26ms over a step of up to 13ms: %v", err)
	}
	if err := wall.fixedTTLCovers(time.Second, 3*time.Millisecond, slow, true); err == nil || !strings.Contains(err.Error(), "a live worker lost its lease to a slow step") {
		t.Errorf("a calibration worker that lost its lease: %v", err)
	}
	for _, cfg := range []Config{{WallClock: true, Adaptive: true}, {}, {WallClock: true, InProcess: true}} {
		if err := (&Runner{cfg: cfg}).fixedTTLCovers(time.Millisecond, time.Second, step{took: time.Second}, true); err != nil {
			t.Errorf("%+v: %v, want nothing to check", cfg, err)
		}
	}
}

// A failing case of a fixed wall-clock run whose own steps outran the
// lease TTL is undecided, naming the step and the TTL to raise to: with
// --wall-clock --lease-ttl 10ms the matrix's load stretched steps to
// 120-180ms (the calibration's one worker measured 4ms) and three cases
// of the reference ended FAIL with I3 and I5. A case whose steps fit, or
// any other mode, keeps its verdict.
func TestFailureWhoseStepsOutranTheTTLIsUndecided(t *testing.T) {
	slow := history.Log{ev("w", 0, reference.EvInvoke, 0), ev("w", 0, reference.EvLeaseAcquire, 1), ev("w", 0, reference.EvPrepared, 181)}
	failing := func(h history.Log) verdict.CaseResult {
		return verdict.CaseResult{Verdict: verdict.Fail, Timeline: h, Violations: []check.Violation{{Invariant: check.I5}, {Invariant: check.I3}}}
	}
	wall := &Runner{cfg: Config{WallClock: true}}
	got := wall.outranTTL(failing(slow), catalogue.Timing{LeaseTTL: 10 * time.Millisecond})
	if got.Verdict != verdict.Undecided || len(got.Violations) != 0 || len(got.Notes) != 1 {
		t.Fatalf("verdict %s, violations %v, notes %q: want undecided with one note", got.Verdict, got.Violations, got.Notes)
	}
	for _, want := range []string{"the I3, I5 it broke say nothing of the store", "lease TTL 10ms is shorter than the steps it must cover", "this case measured steps of up to 181ms", "worker's prepared event", "raise --lease-ttl to at least 750ms"} {
		if !strings.Contains(got.Notes[0], want) {
			t.Errorf("note %q lacks %q", got.Notes[0], want)
		}
	}
	if got := wall.outranTTL(failing(slow), catalogue.Timing{LeaseTTL: 400 * time.Millisecond}); got.Verdict != verdict.Fail {
		t.Errorf("steps of 181ms under a 400ms TTL: %s, want the failure kept", got.Verdict)
	}
	// A fault that did not fire for lack of lease time: undecided too,
	// never NOT CERTIFIED, even when the steps the history times look short.
	quick := history.Log{ev("w", 0, reference.EvInvoke, 0), ev("w", 0, reference.EvLeaseAcquire, 1), ev("w", 0, reference.EvPrepared, 3)}
	missed := verdict.CaseResult{Verdict: verdict.NotExercised, Timeline: quick, NotExercised: &verdict.NotExercisedReason{Cause: verdict.CauseTiming, Detail: "worker fault lost its lease on d4"}}
	got = wall.outranTTL(missed, catalogue.Timing{LeaseTTL: 400 * time.Millisecond})
	if got.Verdict != verdict.Undecided || got.NotExercised != nil || len(got.Notes) != 1 || !strings.Contains(got.Notes[0], "its fault not firing (worker fault lost its lease on d4) says nothing of the store") {
		t.Errorf("not exercised for lack of time: %s %q, want undecided with a note", got.Verdict, got.Notes)
	}
	// Competitors that did not meet: undecided when the steps outran the
	// TTL, kept (it may be the store steering the service away) when not.
	met := func(h history.Log) verdict.CaseResult {
		return verdict.CaseResult{Verdict: verdict.NotExercised, Timeline: h, NotExercised: &verdict.NotExercisedReason{Cause: verdict.CauseInterleaving, Detail: "other never committed"}}
	}
	if got := wall.outranTTL(met(slow), catalogue.Timing{LeaseTTL: 50 * time.Millisecond}); got.Verdict != verdict.Undecided || !strings.Contains(got.Notes[0], "(other never committed) says nothing of the store") {
		t.Errorf("interleaving with steps of 181ms under 50ms: %s %q, want undecided", got.Verdict, got.Notes)
	}
	if got := wall.outranTTL(met(quick), catalogue.Timing{LeaseTTL: 50 * time.Millisecond}); got.Verdict != verdict.NotExercised {
		t.Errorf("interleaving with steps of 2ms under 50ms: %s, want it kept", got.Verdict)
	}
	unreachable := verdict.CaseResult{Verdict: verdict.NotExercised, Timeline: slow, NotExercised: &verdict.NotExercisedReason{Cause: verdict.CauseUnreachable}}
	if got := wall.outranTTL(unreachable, catalogue.Timing{LeaseTTL: 10 * time.Millisecond}); got.Verdict != verdict.NotExercised {
		t.Errorf("not exercised, unreachable: %s, want it kept", got.Verdict)
	}
	for _, cfg := range []Config{{WallClock: true, Adaptive: true}, {}, {WallClock: true, InProcess: true}} {
		if got := (&Runner{cfg: cfg}).outranTTL(failing(slow), catalogue.Timing{LeaseTTL: 10 * time.Millisecond}); got.Verdict != verdict.Fail {
			t.Errorf("%+v: %s, want the failure kept", cfg, got.Verdict)
		}
	}
}
