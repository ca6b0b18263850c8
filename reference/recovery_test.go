package reference_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
)

func TestBackoffIsBoundedExponential(t *testing.T) {
	for _, r := range []*reference.Recovery{{}, {BaseBackoff: 5 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}} {
		prev := time.Duration(0)
		for n := 1; n <= 70; n++ {
			want := 200 * time.Millisecond
			if n <= 6 {
				want = (5 * time.Millisecond) << (n - 1)
			}
			got := r.Backoff(n)
			if got != want {
				t.Fatalf("Backoff(%d) = %s, want %s", n, got, want)
			}
			if got < prev {
				t.Fatalf("Backoff(%d) = %s shrank from %s", n, got, prev)
			}
			prev = got
		}
	}
	r := &reference.Recovery{BaseBackoff: time.Millisecond, MaxBackoff: 40 * time.Millisecond}
	for n, want := range map[int]time.Duration{1: time.Millisecond, 2: 2 * time.Millisecond, 6: 32 * time.Millisecond, 7: 40 * time.Millisecond, 1000: 40 * time.Millisecond} {
		if got := r.Backoff(n); got != want {
			t.Errorf("Backoff(%d) = %s, want %s", n, got, want)
		}
	}
	// Jitter: within [d/2, d], reproducible with a fixed seed.
	a := &reference.Recovery{Rand: rand.New(rand.NewPCG(1, 2))}
	b := &reference.Recovery{Rand: rand.New(rand.NewPCG(1, 2))}
	varied := false
	for n := 1; n <= 30; n++ {
		d := (&reference.Recovery{}).Backoff(n)
		x, y := a.Backoff(n), b.Backoff(n)
		if x != y {
			t.Fatalf("jitter not reproducible: %s vs %s", x, y)
		}
		if x < d/2 || x > d {
			t.Fatalf("Backoff(%d) with jitter = %s, outside [%s, %s]", n, x, d/2, d)
		}
		if x != d {
			varied = true
		}
	}
	if !varied {
		t.Error("jitter never changed a wait")
	}
}

func recorder() (*[]time.Duration, func(context.Context, time.Duration)) {
	var waits []time.Duration
	return &waits, func(_ context.Context, d time.Duration) { waits = append(waits, d) }
}

func TestRecoveryRetriesTransientErrorsThenDeadLetters(t *testing.T) {
	w := newWorld()
	w.sched.Arm(faults.BeforeGraphWrite, faults.Action{Kind: faults.Transient}) // every hit
	_, err := w.service().Ingest(ctx, req1("op-1"))
	if err == nil {
		t.Fatal("ingest succeeded")
	}
	waits, sleep := recorder()
	r := &reference.Recovery{Service: w.service(), MaxAttempts: 8, BaseBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Sleep: sleep}
	rep, err := r.RunOnce(ctx)
	must(t, err)
	if rep.Scanned != 1 || rep.Claimed != 1 || rep.DeadLettered != 1 || rep.Completed != 0 {
		t.Fatalf("report %+v", rep)
	}
	ms := time.Millisecond
	want := []time.Duration{5 * ms, 10 * ms, 20 * ms, 20 * ms, 20 * ms, 20 * ms}
	if fmt.Sprint(*waits) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v (bounded exponential, 8 attempts in all)", *waits, want)
	}
	op := w.op(t, "op-1")
	if op.Disposition != reference.DeadLetter || !strings.Contains(op.FailureReason, "budget") || op.Attempts != 8 {
		t.Fatalf("operation %+v, want DEAD_LETTER after 8 recorded attempts with a budget reason", op)
	}
	if op.ClaimHolder != "" {
		t.Fatalf("claim not released: %+v", op)
	}
	if w.log.Calls("op-1") != 1 {
		t.Fatal("a retry called the model")
	}
	// Nothing left: the next round does not retry it.
	rep, err = r.RunOnce(ctx)
	must(t, err)
	if rep.Busy() || len(*waits) != 6 {
		t.Fatalf("dead letter retried: %+v", rep)
	}
}

func TestRecoveryRetriesTransientErrorsThenCompletes(t *testing.T) {
	want := baseline(t, req1("op-1"))
	w := newWorld()
	w.sched.Arm(faults.BeforeGraphWrite, faults.Action{Kind: faults.Transient, Hit: 1})
	w.sched.Arm(faults.BeforeGraphWrite, faults.Action{Kind: faults.Transient, Hit: 2})
	_, err := w.service().Ingest(ctx, req1("op-1"))
	if err == nil {
		t.Fatal("ingest succeeded")
	}
	waits, sleep := recorder()
	r := &reference.Recovery{Service: w.service(), Sleep: sleep}
	rounds, quiet, err := r.RunUntilQuiet(ctx, 5)
	must(t, err)
	if !quiet || rounds != 2 {
		t.Fatalf("rounds %d quiet %v", rounds, quiet)
	}
	if len(*waits) != 1 || (*waits)[0] != 5*time.Millisecond {
		t.Fatalf("waits %v, want one default base backoff", *waits)
	}
	checkConverged(t, w, "op-1", want)
	if op := w.op(t, "op-1"); op.Attempts != 2 {
		t.Fatalf("attempts %d, want 2 recorded failures", op.Attempts)
	}
}

func TestRecoveryDoesNotRetryPermanentErrors(t *testing.T) {
	w := newWorld()
	w.sched.Arm(faults.BeforeGraphWrite, faults.Action{Kind: faults.Crash, Hit: 1})
	runUntilCrash(func() { _, _ = w.service().Ingest(ctx, req1("op-1")) })
	s := w.restart()
	w.sched.Arm(faults.BeforeRegistrySave, faults.Action{Kind: faults.Permanent})
	resumes := 0
	s.Observer = reference.ObserverFunc(func(e reference.Event) {
		if e.Kind == reference.EvInvoke && e.Detail == "resume" {
			resumes++
		}
	})
	waits, sleep := recorder()
	r := &reference.Recovery{Service: s, Sleep: sleep}
	rep, err := r.RunOnce(ctx)
	must(t, err)
	if rep.DeadLettered != 1 || resumes != 1 || len(*waits) != 0 {
		t.Fatalf("report %+v, resumes %d, waits %v", rep, resumes, *waits)
	}
	if op := w.op(t, "op-1"); op.Disposition != reference.DeadLetter || !strings.Contains(op.FailureReason, "permanent") {
		t.Fatalf("operation %+v", op)
	}
	rep, err = r.RunOnce(ctx)
	must(t, err)
	if rep.Busy() || resumes != 1 {
		t.Fatalf("permanent failure retried: %+v", rep)
	}
}

func TestRecoveryRespectsAnotherInstancesClaim(t *testing.T) {
	want := baseline(t, req1("op-1"))
	w := newWorld()
	w.sched.Arm(faults.BeforeStateCommit, faults.Action{Kind: faults.Crash, Hit: 1})
	runUntilCrash(func() { _, _ = w.service().Ingest(ctx, req1("op-1")) })
	s := w.restart()
	ok, err := w.stores.Ops.Claim(ctx, "op-1", "other-instance", w.clock.Now(), 60_000)
	must(t, err)
	if !ok {
		t.Fatal("claim refused")
	}
	r := &reference.Recovery{Service: s, Sleep: func(context.Context, time.Duration) {}}
	rep, err := r.RunOnce(ctx)
	must(t, err)
	if rep.Scanned != 1 || rep.Skipped != 1 || rep.Claimed != 0 {
		t.Fatalf("report %+v", rep)
	}
	if w.op(t, "op-1").Stage == reference.Completed {
		t.Fatal("recovered an operation another instance has claimed")
	}
	w.clock.Jump(2 * time.Minute) // the other instance's claim expires
	rep, err = r.RunOnce(ctx)
	must(t, err)
	if rep.Completed != 1 {
		t.Fatalf("report %+v", rep)
	}
	checkConverged(t, w, "op-1", want)
}

func TestRecoverySurvivesACrashOfTheRecoverer(t *testing.T) {
	want := baseline(t, req1("op-1"))
	w := newWorld()
	w.sched.Arm(faults.BeforeGraphApplied, faults.Action{Kind: faults.Crash, Hit: 1})
	runUntilCrash(func() { _, _ = w.service().Ingest(ctx, req1("op-1")) })
	for _, p := range []faults.Point{faults.RecoveryBeforeResume, faults.RecoveryBeforeClaim, faults.BeforeRegistrySave} {
		s := w.restart()
		w.sched.Arm(p, faults.Action{Kind: faults.Crash})
		r := &reference.Recovery{Service: s, Sleep: func(context.Context, time.Duration) {}}
		if runUntilCrash(func() { _, _ = r.RunOnce(ctx) }) == nil {
			t.Fatalf("recovery did not crash at %s", p)
		}
	}
	r := &reference.Recovery{Service: w.restart(), Sleep: func(context.Context, time.Duration) {}}
	_, quiet, err := r.RunUntilQuiet(ctx, 3)
	must(t, err)
	if !quiet {
		t.Fatal("not quiet")
	}
	checkConverged(t, w, "op-1", want)
}

func TestRecoveryScanLimitAndQuiet(t *testing.T) {
	w := newWorld()
	r := &reference.Recovery{Service: w.service(), Limit: 2, Sleep: func(context.Context, time.Duration) {}}
	rounds, quiet, err := r.RunUntilQuiet(ctx, 3)
	must(t, err)
	if rounds != 1 || !quiet {
		t.Fatalf("empty store: %d rounds, quiet %v", rounds, quiet)
	}
	w.sched.Arm(faults.BeforeGraphWrite, faults.Action{Kind: faults.Crash})
	for i := 0; i < 3; i++ {
		d := fmt.Sprintf("doc-%d", i)
		runUntilCrash(func() {
			_, _ = w.service().Ingest(ctx, reference.IngestRequest{Space: space, DocumentID: d, Content: fmt.Sprintf("Person:P%d", i)})
		})
	}
	r.Service = w.restart()
	rep, err := r.RunOnce(ctx)
	must(t, err)
	if rep.Scanned != 2 || rep.Completed != 2 {
		t.Fatalf("first round %+v, want the limit of 2", rep)
	}
	rounds, quiet, err = r.RunUntilQuiet(ctx, 1)
	must(t, err)
	if rounds != 1 || !quiet {
		t.Fatalf("second pass: %d rounds, quiet %v", rounds, quiet)
	}
	for i := 0; i < 3; i++ {
		if st, ok := w.current(t, fmt.Sprintf("doc-%d", i)); !ok || st.Revision != 1 {
			t.Fatalf("doc-%d not recovered", i)
		}
	}
}

// A permanent error outside the service's own failure bookkeeping (here an
// unreadable plan) goes to the dead letter at once, without backoff.
func TestRecoveryDeadLettersAnUnreadablePlanAtOnce(t *testing.T) {
	w := newWorld()
	w.sched.Arm(faults.BeforeGraphWrite, faults.Action{Kind: faults.Crash, Hit: 1})
	runUntilCrash(func() { _, _ = w.service().Ingest(ctx, req1("op-1")) })
	must(t, w.ops.OperationStore.(*memory.OperationStore).CorruptPlan("op-1", []byte(`{"kind":"INGES`)))
	waits, sleep := recorder()
	r := &reference.Recovery{Service: w.restart(), Sleep: sleep}
	rep, err := r.RunOnce(ctx)
	must(t, err)
	if rep.DeadLettered != 1 || len(*waits) != 0 {
		t.Fatalf("report %+v, waits %v: a permanent error must not be retried", rep, *waits)
	}
	op := w.op(t, "op-1")
	if op.Disposition != reference.DeadLetter || !strings.Contains(op.FailureReason, "corrupt") || strings.Contains(op.FailureReason, "budget") {
		t.Fatalf("operation %+v", op)
	}
	if w.writer.Calls() != 0 {
		t.Fatal("wrote from an unreadable plan")
	}
}
