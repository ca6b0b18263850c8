package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Safety factors of the derivation. A live holder checks its lease before
// every write and renews it once less than half is left, so it loses the
// lease only if one step takes more than half the TTL: the TTL is kept at
// least ttlPerMaxStep times the longest step seen and ttlPerP99Step times
// the 99th percentile.
const (
	ttlPerMaxStep = 3
	ttlPerP99Step = 4
	// maxTTLScale caps how far the TTL may rise above the configured
	// base: past it the machine is too slow to certify anything useful.
	maxTTLScale = 40
	// calibrationDeadline bounds a calibration worker (the standard
	// script, fault-free): past it the backend is hung, not slow.
	calibrationDeadline = 5 * time.Minute
)

// ttlFor derives a lease TTL from measured step latencies: never below
// base, never above maxTTLScale times base, rounded up to 50ms.
func ttlFor(base, p99, maxStep time.Duration) time.Duration {
	need := max(base, ttlPerMaxStep*maxStep, ttlPerP99Step*p99)
	return roundTTL(min(need, maxTTLScale*base))
}

// roundTTL rounds a TTL up to 50ms.
func roundTTL(d time.Duration) time.Duration {
	const unit = 50 * time.Millisecond
	return (d + unit - 1) / unit * unit
}

// stepLatencies returns, for every worker of a history, the time between
// two consecutive protocol steps while the worker runs on its own: waits
// that belong to the case (a pause at a failpoint, waiting for the lease
// of a killed worker, the time between two calls) are left out; a step
// that ended in a refusal or an error counts.
func stepLatencies(h history.Log) []time.Duration {
	var out []time.Duration
	for _, s := range steps(h) {
		out = append(out, s.took)
	}
	return out
}

// step is one protocol step of a worker: how long it took, and the event
// that ended it.
type step struct {
	took  time.Duration
	ended string
}

// longestStep is the longest of a history's steps (stepLatencies).
func longestStep(h history.Log) step {
	var l step
	for _, s := range steps(h) {
		if s.took >= l.took {
			l = s
		}
	}
	return l
}

// steps are the steps stepLatencies measures.
func steps(h history.Log) []step {
	type key struct {
		w     string
		phase int
	}
	last := map[key]int64{}
	var out []step
	for _, r := range h {
		k := key{r.Worker, r.Phase}
		if r.Kind == history.Seen {
			if r.Obs != nil && r.Obs.What == history.SeenDeadHolder {
				// The worker waited for a stopped holder's lease until
				// here: the case's wait, not a step.
				delete(last, k)
			}
			continue // what the harness saw within a step: no boundary
		}
		if r.Kind != history.Event || r.Event == nil {
			// A hit may pause; an action starts a new call.
			delete(last, k)
			continue
		}
		at := r.Event.At
		switch r.Event.Kind {
		case reference.EvInvoke, reference.EvLeaseAcquire:
			// Between two calls, or waiting for a lease: not a step. (A
			// stall at a fault is cut off by its hit record above.)
		default:
			if prev, ok := last[k]; ok && at >= prev {
				out = append(out, step{time.Duration(at-prev) * time.Millisecond, r.Event.Kind})
			}
		}
		last[k] = at
	}
	return out
}

// adaptive is a runner's live timing: calibrated before the matrix and
// raised while it runs.
type adaptive struct {
	mu sync.Mutex
	t  catalogue.Timing
}

func (a *adaptive) get() catalogue.Timing { a.mu.Lock(); defer a.mu.Unlock(); return a.t }

// raise lifts the TTL to ttl (never lowers it) and records why.
func (a *adaptive) raise(after string, ttl time.Duration, why string, fixedClaim bool) catalogue.Timing {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ttl > a.t.LeaseTTL {
		from := a.t.LeaseTTL
		a.t = a.t.WithTTL(ttl, fixedClaim)
		a.t.Rescales = append(a.t.Rescales, catalogue.Rescale{After: after, From: from, To: ttl, Why: why})
	}
	return a.t
}

// Timing returns the timings the runner uses now.
func (r *Runner) Timing() catalogue.Timing { return r.timing.get() }

// Calibrate measures step latency on the backend with parallel fault-free
// workers at once and, in an adaptive run, derives the timings from it
// (never below the configured lease TTL); a run with fixed timings only
// probes with one worker and reports what it measured. It fails when the
// backend cannot run even a fault-free case (a server that does not
// answer, say): a certification run would then only report "undecided"
// for every case.
func (r *Runner) Calibrate(ctx context.Context, parallel int) (catalogue.Timing, error) {
	if r.cfg.InProcess {
		return r.Timing(), nil
	}
	parallel = max(parallel, 1)
	if !r.cfg.Adaptive {
		parallel = 1
	}
	start := time.Now()
	// A calibration worker that lost its lease stopped early and measured
	// little: calibrate again with the TTL its slow step asked for, a few
	// times at most.
	var t catalogue.Timing
	for round := 1; ; round++ {
		var lost bool
		var err error
		t, lost, err = r.calibrateOnce(ctx, parallel, start)
		if err != nil || !lost || !r.cfg.Adaptive || round == 3 || ctx.Err() != nil {
			return t, err
		}
	}
}

// calibrateOnce runs one calibration round; lost says a calibration worker
// lost its lease (the TTL in use was too short to measure with).
func (r *Runner) calibrateOnce(ctx context.Context, parallel int, start time.Time) (catalogue.Timing, bool, error) {
	results := make([]verdict.CaseResult, parallel)
	// Calibration is there to find out how slow the machine is: its
	// workers get a deadline long enough for a very slow one, not the
	// one a case will get.
	tm := r.Timing()
	tm.ProcessTimeout = max(tm.ProcessTimeout, calibrationDeadline)
	var wg sync.WaitGroup
	for i := range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = r.runCase(ctx, catalogue.CalibrationCase(i), tm)
		}()
	}
	wg.Wait()
	var lat []time.Duration
	var longest step
	lost := false
	for _, res := range results {
		if res.Verdict == verdict.Undecided {
			return r.Timing(), false, fmt.Errorf("calibration on backend %s: %s", r.backend.Name, strings.Join(res.Notes, "; "))
		}
		lat = append(lat, stepLatencies(res.Timeline)...)
		if l := longestStep(res.Timeline); l.took >= longest.took {
			longest = l
		}
		for _, rec := range res.Timeline {
			lost = lost || (rec.Kind == history.Event && rec.Event != nil && rec.Event.Kind == reference.EvLeaseLost)
		}
	}
	med, p99, mx := verdict.LatencyStats(lat)
	if err := r.fixedTTLCovers(tm.LeaseTTL, p99, longest, lost); err != nil {
		return r.Timing(), false, err
	}
	cal := &catalogue.Calibration{Workers: parallel, Steps: len(lat), Median: med, P99: p99, Max: mx, Took: time.Since(start)}
	r.timing.mu.Lock()
	if r.cfg.Adaptive {
		r.timing.t = r.timing.t.WithTTL(ttlFor(r.cfg.LeaseTTL, p99, mx), r.claimFixed)
		r.timing.t.Source = "calibrated"
	}
	if r.cfg.WallClock {
		// On the harness clock steps take no lease time: the one worker
		// only showed that the backend runs a fault-free case.
		r.timing.t.Calibration = cal
	}
	t := r.timing.t
	r.timing.mu.Unlock()
	return t, lost, nil
}

// stepResolution is how finely the history times a step (its events'
// milliseconds): a step measured at d may have taken up to d plus this.
const stepResolution = time.Millisecond

// TTLTooShortError is a fixed lease TTL on the wall clock shorter than the
// steps it must cover: a live holder renews its lease once less than half
// is left, so it keeps the lease only while every step takes under half
// the TTL; past that it is refused mid-operation, and the verdicts would
// be about the timing, not the store. The run is undecided.
type TTLTooShortError struct {
	TTL time.Duration
	// Longest is the longest step measured, up to the resolution of the
	// measurement; Ended the event that ended it; LostLease says a live
	// worker lost its lease outright.
	Longest   time.Duration
	Ended     string
	LostLease bool
	// Need is the least TTL the measurement asks for.
	Need time.Duration
	// By is what measured the steps: the calibration, or a case.
	By string
}

// tooShort says whether a lease TTL covers steps whose 99th percentile
// was p99 and longest l (lost: a live worker lost its lease), as
// measured by by: nil, or why not.
func tooShort(ttl, p99 time.Duration, l step, lost bool, by string) *TTLTooShortError {
	up := l.took + stepResolution
	if !lost && 2*up <= ttl {
		return nil
	}
	need := roundTTL(max(ttlPerMaxStep*up, ttlPerP99Step*(p99+stepResolution)))
	return &TTLTooShortError{TTL: ttl, Longest: up, Ended: cmp.Or(l.ended, "first"), LostLease: lost, Need: need, By: by}
}

func (e *TTLTooShortError) Error() string {
	s := fmt.Sprintf("lease TTL %s is shorter than the steps it must cover: a live holder keeps its lease only while each step takes under half the TTL, and %s measured steps of up to %s (timed to the millisecond; the longest ended in the worker's %s event)",
		e.TTL, e.By, e.Longest, e.Ended)
	if e.LostLease {
		s += ", and a live worker lost its lease to a slow step"
	}
	return s + fmt.Sprintf("; raise --lease-ttl to at least %s (or leave it out: with --wall-clock the TTL then follows the measured steps)", e.Need)
}

// fixedWallTTL says the run keeps a lease TTL fixed on the wall clock: the
// one timing whose steps can outrun it. An adaptive run raises its TTL
// instead, and on the harness clock or in process a step takes no lease
// time.
func (r *Runner) fixedWallTTL() bool { return !r.cfg.Adaptive && !r.cfg.InProcess && r.cfg.WallClock }

// fixedTTLCovers says whether a fixed lease TTL on the wall clock covers
// the steps a calibration measured (p99 and the longest, lost: a worker
// lost its lease).
func (r *Runner) fixedTTLCovers(ttl, p99 time.Duration, longest step, lost bool) error {
	if !r.fixedWallTTL() {
		return nil
	}
	if short := tooShort(ttl, p99, longest, lost, "the fault-free calibration run"); short != nil {
		return short
	}
	return nil
}

// fixedTTLGate runs the calibration ahead of the probe in a run with a
// fixed lease TTL on the wall clock: a TTL too short for the steps would
// leave the probe's cases not exercised, or worse, and the report would
// blame the store; the TTLTooShortError says why the run is undecided
// instead. Any other calibration error is left to the probe and RunAll,
// which meet it again.
func (r *Runner) fixedTTLGate(ctx context.Context) error {
	if !r.fixedWallTTL() {
		return nil
	}
	var short *TTLTooShortError
	if _, err := r.Calibrate(ctx, 1); errors.As(err, &short) {
		return err
	}
	return nil
}

// outranTTL makes a case of a run with a fixed lease TTL on the wall
// clock undecided when its own steps outran the TTL: a live holder then
// lost its lease mid-operation, and a failure says that (seen: I3 and I5
// with --lease-ttl 10ms and steps of 120-180ms under the matrix's load,
// which the calibration's one worker had measured at 4ms), not that the
// store is wrong; nor does a fault that did not fire for lack of lease
// time (timing), or whose competitors did not meet as the case needs
// while its steps outran the TTL (interleaving), make the store NOT
// CERTIFIED. An adaptive run raises its TTL and runs such a case again
// instead.
func (r *Runner) outranTTL(res verdict.CaseResult, tm catalogue.Timing) verdict.CaseResult {
	var cause verdict.Cause
	if res.NotExercised != nil {
		cause = res.NotExercised.Cause
	}
	timing := res.Verdict == verdict.NotExercised && cause == verdict.CauseTiming
	if res.Verdict != verdict.Fail && !timing && !(res.Verdict == verdict.NotExercised && cause == verdict.CauseInterleaving) || !r.fixedWallTTL() {
		return res
	}
	_, p99, _ := verdict.LatencyStats(stepLatencies(res.Timeline))
	short := tooShort(tm.LeaseTTL, p99, longestStep(res.Timeline), timing, "this case")
	if short == nil {
		return res
	}
	what := fmt.Sprintf("the %s it broke say", strings.Join(res.Broken(), ", "))
	if res.Verdict == verdict.NotExercised {
		what = fmt.Sprintf("its fault not firing (%s) says", res.NotExercised.Detail)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("its steps outran the lease TTL, so %s nothing of the store: %s", what, short))
	res.Verdict, res.Violations, res.NotExercised = verdict.Undecided, nil, nil
	return res
}

// rescaleFrom raises the TTL when a case's workers took steps so long that a
// live holder came close to losing its lease.
func (r *Runner) rescaleFrom(res verdict.CaseResult) {
	if !r.cfg.Adaptive || r.cfg.InProcess {
		return
	}
	_, p99, mx := verdict.LatencyStats(stepLatencies(res.Timeline))
	cur := r.Timing()
	if mx*2 <= cur.LeaseTTL {
		return
	}
	if ttl := ttlFor(r.cfg.LeaseTTL, p99, mx); ttl > cur.LeaseTTL {
		r.timing.raise(res.Case.ID, ttl, fmt.Sprintf("a step took %s", mx), r.claimFixed)
	}
}
