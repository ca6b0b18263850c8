package reference

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
)

// Recovery scans unfinished operations, claims each for this instance and
// resumes it through Service.Resume. Recoverable errors are retried with
// bounded exponential backoff and jitter; permanent errors and exhausted
// budgets go to the dead letter with their reason. Every attempt is
// recorded on the operation.
type Recovery struct {
	Service *Service
	// Space, when set, limits recovery to one space (many tenants, or many
	// simulated cases, sharing one store).
	Space string
	// Limit bounds one scan (default 100).
	Limit int
	// ClaimTTL is how long a claim keeps other instances off (default 5s).
	ClaimTTL time.Duration
	// MaxAttempts is the retry budget per operation (default 5).
	MaxAttempts int
	// BaseBackoff and MaxBackoff bound the exponential backoff between
	// retries within one round (defaults 5ms and 200ms).
	BaseBackoff, MaxBackoff time.Duration
	// Rand supplies jitter (a fixed seed keeps a run reproducible).
	Rand *rand.Rand
	// Sleep waits between retries (time-based when nil).
	Sleep func(context.Context, time.Duration)
}

// RoundReport says what one recovery round did.
type RoundReport struct {
	Scanned, Claimed, Completed, Abandoned, DeadLettered, Failed, Skipped int
	Errors                                                                []string
}

// Busy reports whether the round found work still in progress.
func (r RoundReport) Busy() bool { return r.Scanned > 0 }

func (r *Recovery) defaults() (limit, maxAttempts int, ttl, base, maxB time.Duration) {
	limit, maxAttempts, ttl, base, maxB = r.Limit, r.MaxAttempts, r.ClaimTTL, r.BaseBackoff, r.MaxBackoff
	if limit <= 0 {
		limit = 100
	}
	if maxAttempts <= 0 {
		maxAttempts = 5
	}
	if ttl <= 0 {
		ttl = 5 * time.Second
	}
	if base <= 0 {
		base = 5 * time.Millisecond
	}
	if maxB <= 0 {
		maxB = 200 * time.Millisecond
	}
	return
}

// Backoff returns the wait before retry n (1-based): base*2^(n-1), capped,
// with up to 50% jitter.
func (r *Recovery) Backoff(n int) time.Duration {
	_, _, _, base, maxB := r.defaults()
	d := base << min(n-1, 20)
	if d > maxB || d <= 0 {
		d = maxB
	}
	if r.Rand != nil {
		d = d/2 + time.Duration(r.Rand.Int64N(int64(d/2)+1))
	}
	return d
}

// RunOnce runs one recovery round.
func (r *Recovery) RunOnce(ctx context.Context) (RoundReport, error) {
	s := r.Service
	limit, maxAttempts, ttl, _, _ := r.defaults()
	var rep RoundReport
	ops, err := r.scan(ctx, limit)
	if err != nil {
		return rep, fmt.Errorf("recovery scan: %w", err)
	}
	rep.Scanned = len(ops)
	for _, op := range ops {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		var claimed bool
		err := s.at(ctx, faults.RecoveryBeforeClaim, func() error {
			var e error
			claimed, e = s.Ops.Claim(ctx, op.OperationID, s.holder(), s.now(), ttl.Milliseconds())
			return e
		})
		if err != nil {
			rep.Failed++
			rep.Errors = append(rep.Errors, fmt.Sprintf("claim %s: %v", op.OperationID, err))
			continue
		}
		if !claimed && !s.has(BugResumeIgnoresClaim) {
			rep.Skipped++
			continue
		}
		rep.Claimed++
		r.recoverOne(ctx, op, maxAttempts, &rep)
		if _, err := s.Ops.ReleaseClaim(ctx, op.OperationID, s.holder()); err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("release claim %s: %v", op.OperationID, err))
		}
	}
	return rep, nil
}

func (r *Recovery) recoverOne(ctx context.Context, op Operation, maxAttempts int, rep *RoundReport) {
	s := r.Service
	for try := 1; ; try++ {
		var res Result
		err := s.at(ctx, faults.RecoveryBeforeResume, func() error {
			var e error
			res, e = s.Resume(ctx, op.OperationID)
			return e
		})
		if err == nil {
			switch res.Outcome {
			case OutcomeAbandoned, OutcomeSuperseded:
				rep.Abandoned++
			case OutcomeDeadLetter:
				rep.DeadLettered++
			default:
				rep.Completed++
			}
			return
		}
		cur, gerr := s.Ops.Get(ctx, op.OperationID)
		attempts := try
		if gerr == nil {
			attempts = max(attempts, cur.Attempts)
			if cur.Disposition == DeadLetter {
				rep.DeadLettered++
				return
			}
		}
		if !s.retryable(err) || attempts >= maxAttempts {
			reason := err.Error()
			if s.retryable(err) {
				reason = fmt.Sprintf("retry budget of %d attempts exhausted: %v", maxAttempts, err)
			}
			if derr := s.DeadLetter(ctx, op.OperationID, reason); derr != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("dead letter %s: %v", op.OperationID, derr))
			}
			rep.DeadLettered++
			return
		}
		if errors.Is(err, ErrLockTimeout) || errors.Is(err, ErrLeaseLost) {
			// Another instance is working on the document: leave it to them.
			rep.Failed++
			rep.Errors = append(rep.Errors, fmt.Sprintf("resume %s: %v", op.OperationID, err))
			return
		}
		d := r.Backoff(try)
		if r.Sleep != nil {
			r.Sleep(ctx, d)
		} else {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// scan lists up to limit unfinished operations (of Space, if set).
func (r *Recovery) scan(ctx context.Context, limit int) ([]Operation, error) {
	skipPending := r.Service.has(BugScanSkipsPendingDeadLetter)
	if r.Space == "" && !skipPending {
		return r.Service.Ops.ListRecoverable(ctx, limit)
	}
	ops, err := r.Service.Ops.ListRecoverable(ctx, max(limit, 10000))
	if err != nil {
		return nil, err
	}
	out := ops[:0]
	for _, op := range ops {
		if skipPending && strings.HasPrefix(op.FailureReason, DeadLetterPending) {
			continue // the defect: a dead letter under way is left out
		}
		if (r.Space == "" || op.Space == r.Space) && len(out) < limit {
			out = append(out, op)
		}
	}
	return out, nil
}

// RunUntilQuiet runs rounds until a round finds nothing unfinished, or
// maxRounds rounds have run; it returns the rounds run and whether the
// store is quiet.
func (r *Recovery) RunUntilQuiet(ctx context.Context, maxRounds int) (int, bool, error) {
	for round := 1; round <= maxRounds; round++ {
		rep, err := r.RunOnce(ctx)
		if err != nil {
			return round, false, err
		}
		if !rep.Busy() {
			return round, true, nil
		}
		if rep.Skipped+rep.Failed > 0 {
			// Work is held by another instance's claim or lease (perhaps
			// a dead one): give it time to expire before the next round.
			_, _, ttl, _, _ := r.defaults()
			if err := r.Service.sleep(ctx, ttl/4); err != nil {
				return round, false, err
			}
		}
	}
	ops, err := r.scan(ctx, 1)
	if err != nil {
		return maxRounds, false, err
	}
	return maxRounds, len(ops) == 0, nil
}
