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

	"github.com/crashmatrix/crashmatrix/faults"
)

// Report is the outcome of a whole run.
type Report struct {
	Backend  string          `json:"backend"`
	Mutant   string          `json:"mutant,omitempty"`
	Bugs     []string        `json:"bugs,omitempty"`
	Seed     int64           `json:"seed"`
	Started  time.Time       `json:"started"`
	Took     time.Duration   `json:"took"`
	Results  []CaseResult    `json:"results"`
	Counts   map[Verdict]int `json:"counts"`
	Verdict  Verdict         `json:"verdict"`
	ExitCode int             `json:"exitCode"`
	// Timing is what the run used: the lease TTL and what follows from
	// it, the calibration and every rise while it ran.
	Timing Timing `json:"timing"`
	// StoreWindows are the windows the store declared, as the probe run
	// found them; Probed says a probe ran to its end (so an empty list
	// means none).
	StoreWindows []StoreWindow `json:"storeWindows,omitempty"`
	Probed       bool          `json:"probed,omitempty"`
	// DurableCalls are the probe's store calls that made a durable file
	// operation on the lazy mount, DurableMulti those that made two or
	// more (sim/durable.go); both 0 where no durable probe ran.
	DurableCalls int `json:"durableCalls,omitempty"`
	DurableMulti int `json:"durableMulti,omitempty"`
	// Matrix is the whole matrix a certify run belongs to; Shard, when
	// set, the part of it the run covered (certify --shard); Merged the
	// shard reports a merge combined into this one (sim/shard.go).
	Matrix *MatrixID     `json:"matrix,omitempty"`
	Shard  *ShardRun     `json:"shard,omitempty"`
	Merged []MergedShard `json:"merged,omitempty"`
	// Subset names the filter of a run that was not the whole matrix
	// (e.g. "--point beforeCompleted --kind crash"); "" for the whole.
	Subset string `json:"subset,omitempty"`
	// PowerLoss, when the run left the power-loss column out, says so
	// and why ("power loss: not tested (...)"); reports print it.
	PowerLoss string `json:"powerLoss,omitempty"`
	// Exploration says what the seeded exploration after the matrix ran
	// and found ("exploration: 3000 schedules of seed 1 (in-process), no
	// invariant broken"; "exploration: off"); a finding is among Results
	// as a failing case. Reports print it.
	Exploration string `json:"exploration,omitempty"`
	// StoreStarts says how long the workers' stores took to start
	// ("store starts: median …, max … over N worker store opens"), when
	// the backend notes it (store-cmd).
	StoreStarts string `json:"storeStarts,omitempty"`
	// Upgrade, in a run recovered by another build of the store
	// (Config.RecoverWith), says which (Runner.UpgradeLine); reports
	// print it.
	Upgrade string `json:"upgrade,omitempty"`
}

// maxAttempts bounds the runs of a case that is not exercised.
const maxAttempts = 3

// runWithRetries runs a case; one that was not exercised (a fault that did
// not fire never counts as a pass) is run again from scratch, with a lease
// TTL twice as long when time ran out and the run is adaptive. Every
// result feeds the runner's rescaling.
func (r *Runner) runWithRetries(ctx context.Context, c Case) CaseResult {
	tm := r.Timing()
	var attempts []Attempt
	var earlier []string
	stallRetried := false
	for n := 1; ; n++ {
		res := r.runCase(ctx, c.ForTTL(tm.LeaseTTL), tm)
		r.rescaleFrom(res)
		res.Attempts = attempts
		if len(earlier) > 0 {
			// One flat note for the reports, whatever the number of runs.
			res.Notes = append(res.Notes, EarlierAttempts+strings.Join(earlier, " | "))
		}
		why, ok := hungUnderOldTiming(res, tm, r.Timing())
		if !ok && !stallRetried && r.backend.serverBacked() {
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
			attempts = append(attempts, Attempt{LeaseTTL: tm.LeaseTTL, Reason: why})
			earlier = append(earlier, fmt.Sprintf("attempt %d: %s (lease TTL %s)", n, why.Detail, tm.LeaseTTL))
			tm = r.Timing()
			continue
		}
		if res.Verdict != NotExercised || n == maxAttempts || ctx.Err() != nil || res.NotExercised == nil || res.NotExercised.Cause.settled(r.backend.serverBacked()) {
			return r.outranTTL(res, tm)
		}
		attempts = append(attempts, Attempt{LeaseTTL: tm.LeaseTTL, Reason: *res.NotExercised})
		own := slices.DeleteFunc(slices.Clone(res.Notes), func(n string) bool { return strings.HasPrefix(n, EarlierAttempts) })
		earlier = append(earlier, fmt.Sprintf("attempt %d: %s (lease TTL %s)", n, strings.Join(own, "; "), tm.LeaseTTL))
		next := r.Timing() // it may have risen meanwhile
		if (res.NotExercised.Cause == CauseTiming || res.NotExercised.Cause == CauseInterleaving) && r.cfg.Adaptive && !r.cfg.InProcess {
			next = next.withTTL(max(next.LeaseTTL, 2*tm.LeaseTTL), r.claimFixed)
		}
		tm = next
	}
}

// hungUnderOldTiming reports whether an undecided case's worker was killed
// at its deadline (started with timing was) while the run's timing now
// allows a longer one, and says so as a timing reason.
func hungUnderOldTiming(res CaseResult, was, now Timing) (NotExercisedReason, bool) {
	w, ok := timedOut(res)
	if !ok || now.ProcessTimeout <= was.ProcessTimeout {
		return NotExercisedReason{}, false
	}
	return NotExercisedReason{Cause: CauseTiming,
		Detail: fmt.Sprintf("worker %s outlived the %s deadline of lease TTL %s, and the run's timing has since risen to lease TTL %s (deadline %s)", w.Worker, was.ProcessTimeout, was.LeaseTTL, now.LeaseTTL, now.ProcessTimeout),
		Advice: timingAdvice(now)}, true
}

// timedOut returns the first worker of an undecided case that was killed
// at its deadline.
func timedOut(res CaseResult) (WorkerResult, bool) {
	if res.Verdict == Undecided {
		for _, w := range res.Workers {
			if w.Exit == "timeout" {
				return w, true
			}
		}
	}
	return WorkerResult{}, false
}

// hungOnServer reports whether an undecided case's worker was killed at
// its deadline, and says so as a timing reason.
func hungOnServer(res CaseResult, was Timing) (NotExercisedReason, bool) {
	w, ok := timedOut(res)
	if !ok {
		return NotExercisedReason{}, false
	}
	return NotExercisedReason{Cause: CauseTiming,
		Detail: fmt.Sprintf("worker %s hung past its %s deadline on a server backend (a loaded server can stall for minutes and go on); run once more", w.Worker, was.ProcessTimeout),
		Advice: timingAdvice(was)}, true
}

// serverBacked says whether the backend's stores live in servers (not
// embedded, not in the process's memory).
func (b Backend) serverBacked() bool { return !b.Embedded && !b.Volatile }

// RunAll runs cases on parallel workers slots and reports each result as it
// lands (for a progress bar).
func (r *Runner) RunAll(ctx context.Context, cases []Case, parallel int, progress func(CaseResult)) Report {
	if parallel <= 0 {
		parallel = 4
	}
	rep := Report{Backend: r.backend.Name, Mutant: r.cfg.Mutant, Seed: r.cfg.Seed, Started: time.Now(), Counts: map[Verdict]int{}, Upgrade: r.UpgradeLine()}
	calibrationFailed := func(err error) Report {
		// The backend cannot run a fault-free case: every case would be
		// undecided for the same reason, said once.
		rep.Results = []CaseResult{{Case: CalibrationCase(0), Verdict: Undecided, Notes: []string{err.Error()}}}
		rep.Timing = r.Timing()
		rep.Took = time.Since(rep.Started)
		rep.finish()
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
	results := make([]CaseResult, len(cases))
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
					results[i] = CaseResult{Case: cases[i], Verdict: Undecided, Notes: []string{NotRunFailFast}}
					continue
				}
				res := r.runWithRetries(casesCtx, cases[i])
				results[i] = res
				if res.Verdict == Fail {
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
		ca, cb := crashedServer(cases[order[a]]), crashedServer(cases[order[b]])
		if ca != cb {
			return ca < cb
		}
		return cost(cases[order[a]]) > cost(cases[order[b]])
	})
	for _, i := range order {
		if casesCtx.Err() != nil {
			results[i] = CaseResult{Case: cases[i], Verdict: Undecided, Notes: []string{"interrupted"}}
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
	rep.finish()
	return rep
}

// NotRunFailFast is the note of a case a fail-fast run never started.
const NotRunFailFast = "not run: the run stopped at its first failure (fail-fast)"

// EarlierAttempts starts the note of a case that was run again because
// it was not exercised; it lists each earlier attempt's own notes, flat.
const EarlierAttempts = "earlier attempts were not exercised: "

// Finish computes the counts, the verdict and the exit code of a report
// assembled from cases run one by one (the run command's scenarios).
func (rep *Report) Finish() { rep.finish() }

// cost estimates a case's duration for scheduling: each worker process,
// and a paused (background) worker that waits out a lease, counts.
func cost(c Case) int {
	n := len(c.Steps)
	for _, st := range c.Steps {
		if st.Background {
			n += 2
		}
	}
	return n
}

// finish computes counts, the overall verdict and the exit code (0
// certified, 1 an invariant broke or a case was not exercised, 2
// undecided or nothing applicable ran). Not-applicable cases neither pass
// nor fail.
func (rep *Report) finish() {
	rep.StoreStarts = storeStartsLine(rep.Results)
	rep.Counts = map[Verdict]int{}
	judged, unmet := false, 0
	for _, r := range rep.Results {
		rep.Counts[r.Verdict]++
		if r.Expect != nil {
			judged = true
			if !r.Expect.Met {
				unmet++
			}
		}
	}
	if judged {
		// Scenarios judged against their expectations (run): exit 0 when
		// every one met its own, as crashmatrix run exits.
		switch {
		case rep.Counts[Undecided] > 0:
			rep.Verdict, rep.ExitCode = Undecided, 2
		case unmet > 0:
			rep.Verdict, rep.ExitCode = Fail, 1
		default:
			rep.Verdict, rep.ExitCode = Pass, 0
		}
		return
	}
	switch {
	case rep.Counts[Fail] > 0 || rep.Counts[NotExercised] > 0:
		rep.Verdict, rep.ExitCode = Fail, 1
	case rep.Counts[Undecided] > 0 || len(rep.Results) == rep.Counts[NotApplicable]:
		rep.Verdict, rep.ExitCode = Undecided, 2
	default:
		rep.Verdict, rep.ExitCode = Pass, 0
	}
}

// Broken lists the invariants (short names) broken anywhere in the run.
func (rep Report) Broken() []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rep.Results {
		for _, b := range r.Broken() {
			if !seen[b] {
				seen[b] = true
				out = append(out, b)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Filter selects cases by window points, kinds and classes (empty = all).
func Filter(cases []Case, points []faults.Point, kinds []faults.Kind, classes []string) []Case {
	in := func(n int, f func(int) bool) bool {
		if n == 0 {
			return true
		}
		for i := 0; i < n; i++ {
			if f(i) {
				return true
			}
		}
		return false
	}
	var out []Case
	for _, c := range cases {
		if c.Class != "" {
			if len(points) > 0 || len(kinds) > 0 {
				if len(classes) == 0 {
					continue
				}
			}
			if !in(len(classes), func(i int) bool { return classes[i] == c.Class }) {
				continue
			}
			out = append(out, c)
			continue
		}
		if len(classes) > 0 && len(points) == 0 && len(kinds) == 0 {
			continue
		}
		if in(len(points), func(i int) bool { return points[i] == c.Point }) && in(len(kinds), func(i int) bool { return kinds[i] == c.Kind }) {
			out = append(out, c)
		}
	}
	return out
}
