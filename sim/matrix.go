package sim

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crashmatrix/crashmatrix/sim/casefaults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// maxAttempts bounds the runs of a case that is not exercised.
const maxAttempts = 3

// runWithRetries runs a case; one that was not exercised (a fault that did
// not fire never counts as a pass) is run again from scratch, with a lease
// TTL twice as long when time ran out and the run is adaptive. Every
// result feeds the runner's rescaling.
func (r *Runner) runWithRetries(ctx context.Context, c catalogue.Case) verdict.CaseResult {
	tm := r.Timing()
	var attempts []verdict.Attempt
	var earlier []string
	stallRetried := false
	for n := 1; ; n++ {
		res := r.runCase(ctx, c.ForTTL(tm.LeaseTTL), tm)
		r.rescaleFrom(res)
		res.Attempts = attempts
		if len(earlier) > 0 {
			// One flat note for the reports, whatever the number of runs.
			res.Notes = append(res.Notes, verdict.EarlierAttempts+strings.Join(earlier, " | "))
		}
		why, ok := hungUnderOldTiming(res, tm, r.Timing())
		if !ok && !stallRetried && r.backend.ServerBacked() {
			// A worker hung past its deadline on a server: a server of a
			// loaded machine can stall for minutes and go on, so run the
			// case once more before calling it undecided.
			if why, ok = hungOnServer(res, tm); ok {
				stallRetried = true
			}
		}
		if ok && r.cfg.Adaptive && !r.cfg.InProcess && n < maxAttempts && ctx.Err() == nil {
			// A worker was killed at the deadline of a timing the run has
			// since raised (another case measured a slower machine): that
			// is time running out, not a hang, so run it again with the
			// raised timing.
			attempts = append(attempts, verdict.Attempt{LeaseTTL: tm.LeaseTTL, Reason: why})
			earlier = append(earlier, fmt.Sprintf("attempt %d: %s (lease TTL %s)", n, why.Detail, tm.LeaseTTL))
			tm = r.Timing()
			continue
		}
		if res.Verdict != verdict.NotExercised || n == maxAttempts || ctx.Err() != nil || res.NotExercised == nil || res.NotExercised.Cause.Settled(r.backend.ServerBacked()) {
			return r.outranTTL(res, tm)
		}
		attempts = append(attempts, verdict.Attempt{LeaseTTL: tm.LeaseTTL, Reason: *res.NotExercised})
		own := slices.DeleteFunc(slices.Clone(res.Notes), func(n string) bool { return strings.HasPrefix(n, verdict.EarlierAttempts) })
		earlier = append(earlier, fmt.Sprintf("attempt %d: %s (lease TTL %s)", n, strings.Join(own, "; "), tm.LeaseTTL))
		next := r.Timing() // it may have risen meanwhile
		if (res.NotExercised.Cause == verdict.CauseTiming || res.NotExercised.Cause == verdict.CauseInterleaving) && r.cfg.Adaptive && !r.cfg.InProcess {
			next = next.WithTTL(max(next.LeaseTTL, 2*tm.LeaseTTL), r.claimFixed)
		}
		tm = next
	}
}

// hungUnderOldTiming reports whether an undecided case's worker was killed
// at its deadline (started with timing was) while the run's timing now
// allows a longer one, and says so as a timing reason.
func hungUnderOldTiming(res verdict.CaseResult, was, now catalogue.Timing) (verdict.NotExercisedReason, bool) {
	w, ok := timedOut(res)
	if !ok || now.ProcessTimeout <= was.ProcessTimeout {
		return verdict.NotExercisedReason{}, false
	}
	return verdict.NotExercisedReason{Cause: verdict.CauseTiming,
		Detail: fmt.Sprintf("worker %s outlived the %s deadline of lease TTL %s, and the run's timing has since risen to lease TTL %s (deadline %s)", w.Worker, was.ProcessTimeout, was.LeaseTTL, now.LeaseTTL, now.ProcessTimeout),
		Advice: verdict.TimingAdvice(now)}, true
}

// timedOut returns the first worker of an undecided case that was killed
// at its deadline.
func timedOut(res verdict.CaseResult) (verdict.WorkerResult, bool) {
	if res.Verdict == verdict.Undecided {
		for _, w := range res.Workers {
			if w.Exit == "timeout" {
				return w, true
			}
		}
	}
	return verdict.WorkerResult{}, false
}

// hungOnServer reports whether an undecided case's worker was killed at
// its deadline, and says so as a timing reason.
func hungOnServer(res verdict.CaseResult, was catalogue.Timing) (verdict.NotExercisedReason, bool) {
	w, ok := timedOut(res)
	if !ok {
		return verdict.NotExercisedReason{}, false
	}
	return verdict.NotExercisedReason{Cause: verdict.CauseTiming,
		Detail: fmt.Sprintf("worker %s hung past its %s deadline on a server backend (a loaded server can stall for minutes and go on); run once more", w.Worker, was.ProcessTimeout),
		Advice: verdict.TimingAdvice(was)}, true
}

// RunAll runs cases on parallel workers slots and reports each result as it
// lands (for a progress bar).
func (r *Runner) RunAll(ctx context.Context, cases []catalogue.Case, parallel int, progress func(verdict.CaseResult)) verdict.Report {
	if parallel <= 0 {
		parallel = 4
	}
	rep := verdict.Report{Backend: r.backend.Name, Mutant: r.cfg.Mutant, Seed: r.cfg.Seed, Started: time.Now(), Counts: map[verdict.Verdict]int{}, Upgrade: r.UpgradeLine()}
	if r.cfg.Service != nil {
		rep.Backend = "service " + r.cfg.Service.Declared.Name + " (harness stores: " + r.backend.Name + ")"
		rep.NotJudged = r.cfg.Service.NotJudged()
	}
	calibrationFailed := func(err error) verdict.Report {
		// The backend cannot run a fault-free case: every case would be
		// undecided for the same reason, said once.
		rep.Results = []verdict.CaseResult{{Case: catalogue.CalibrationCase(0), Verdict: verdict.Undecided, Notes: []string{err.Error()}}}
		rep.Timing = r.Timing()
		rep.Took = time.Since(rep.Started)
		rep.Finish()
		return rep
	}
	// On the harness clock the calibration changes no timing (its one
	// worker only shows that the backend runs a fault-free case), so it
	// runs beside the cases rather than before them; if it fails, the
	// cases are stopped and the run reports the calibration alone, as
	// when it runs first.
	calibrated := make(chan error, 1)
	casesCtx := ctx
	if r.cfg.InProcess || r.cfg.WallClock {
		_, err := r.Calibrate(ctx, min(parallel, len(cases)))
		if err != nil {
			return calibrationFailed(err)
		}
		calibrated <- nil
	} else {
		var stop context.CancelFunc
		casesCtx, stop = context.WithCancel(ctx)
		defer stop()
		go func() {
			_, err := r.Calibrate(ctx, min(parallel, len(cases)))
			if err != nil {
				stop()
			}
			calibrated <- err
		}()
	}
	for _, b := range r.cfg.Bugs {
		rep.Bugs = append(rep.Bugs, string(b))
	}
	results := make([]verdict.CaseResult, len(cases))
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed atomic.Bool
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if r.cfg.FailFast && failed.Load() {
					// The one place fail-fast acts: a case handed out
					// after the failure is marked here, not run.
					results[i] = verdict.CaseResult{Case: cases[i], Verdict: verdict.Undecided, Notes: []string{verdict.NotRunFailFast}}
					continue
				}
				res := r.runWithRetries(casesCtx, cases[i])
				results[i] = res
				if res.Verdict == verdict.Fail {
					failed.Store(true)
				}
				if progress != nil {
					mu.Lock()
					progress(res)
					mu.Unlock()
				}
			}
		}()
	}
	// Longest cases first (more workers, a paused worker, a crash in
	// recovery), so that the run does not end waiting for one slow case
	// started last. Results keep the matrix order.
	order := make([]int, len(cases))
	for i := range order {
		order[i] = i
	}
	// The cases that crash a server run apart from the others, together
	// with those that crash the same server (see serverGate): they go
	// last, grouped by server, so that the run drains once per group.
	sort.SliceStable(order, func(a, b int) bool {
		ca, cb := casefaults.CrashedServer(cases[order[a]]), casefaults.CrashedServer(cases[order[b]])
		if ca != cb {
			return ca < cb
		}
		return cost(cases[order[a]]) > cost(cases[order[b]])
	})
	for _, i := range order {
		if casesCtx.Err() != nil {
			results[i] = verdict.CaseResult{Case: cases[i], Verdict: verdict.Undecided, Notes: []string{"interrupted"}}
			continue
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if err := <-calibrated; err != nil && ctx.Err() == nil {
		return calibrationFailed(err)
	}
	rep.Results = results
	rep.Timing = r.Timing()
	rep.Took = time.Since(rep.Started)
	rep.Finish()
	return rep
}

// cost estimates a case's duration for scheduling: each worker process,
// and a paused (background) worker that waits out a lease, counts.
func cost(c catalogue.Case) int {
	n := len(c.Steps)
	for _, st := range c.Steps {
		if st.Background {
			n += 2
		}
	}
	return n
}
