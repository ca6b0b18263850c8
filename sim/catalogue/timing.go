package catalogue

import (
	"fmt"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
)

// Timing is every wall-clock duration a process-mode run depends on. All of
// it follows from one value, the lease TTL, so that a slower machine gets
// proportionally longer timings and cases defined relative to the TTL
// (pauses past it, pauses around it) keep their meaning.
type Timing struct {
	// LeaseTTL is the workers' document lease TTL: the one value every
	// pause length of the matrix is defined against.
	LeaseTTL time.Duration `json:"leaseTtl"`
	// ClaimTTL bounds a recovery claim (LeaseTTL + 50ms unless set).
	ClaimTTL time.Duration `json:"claimTtl"`
	// ProcessTimeout kills a worker that has not ended by then.
	ProcessTimeout time.Duration `json:"processTimeout"`
	// Source says where LeaseTTL came from: "fixed" (set by the caller),
	// "default", "calibrated" (measured before the run) or "simulated"
	// (the in-process mode's clock, where wall time does not matter).
	Source string `json:"source"`
	// Calibration is what was measured before the matrix, when it was.
	Calibration *Calibration `json:"calibration,omitempty"`
	// Rescales are the rises of LeaseTTL while the run went on.
	Rescales []Rescale `json:"rescales,omitempty"`
}

// Calibration is the step latency a run measured on its backend, under the
// run's own parallelism, before the matrix started.
type Calibration struct {
	// Workers is how many fault-free workers ran at once; Steps how many
	// step latencies they gave.
	Workers int `json:"workers"`
	Steps   int `json:"steps"`
	// Median, P99 and Max of the time between two consecutive protocol
	// steps of one worker holding a lease.
	Median time.Duration `json:"median"`
	P99    time.Duration `json:"p99"`
	Max    time.Duration `json:"max"`
	// Took is the calibration's wall time.
	Took time.Duration `json:"took"`
}

// Rescale records one rise of the lease TTL during a run, and why.
type Rescale struct {
	After string        `json:"after"` // the case whose result caused it
	From  time.Duration `json:"from"`
	To    time.Duration `json:"to"`
	Why   string        `json:"why"`
}

// LongPause is a pause well past the lease: the paused holder must find
// its lease expired and taken over when it wakes.
func (t Timing) LongPause() time.Duration { return 2*t.LeaseTTL + 100*time.Millisecond }

// ShortPause is a pause well inside the lease.
func (t Timing) ShortPause() time.Duration { return t.LeaseTTL / 2 }

// String is the one line a report prints about the timings of a run.
func (t Timing) String() string {
	s := fmt.Sprintf("timing: lease TTL %s (%s), claim TTL %s, pause past the lease %s, worker deadline %s",
		t.LeaseTTL, t.Source, t.ClaimTTL, t.LongPause(), t.ProcessTimeout)
	if c := t.Calibration; c != nil {
		s += fmt.Sprintf("; calibration: %d workers at once, step latency median %s, p99 %s, max %s (%d steps, %s)",
			c.Workers, c.Median, c.P99, c.Max, c.Steps, c.Took.Round(time.Millisecond))
	}
	for _, r := range t.Rescales {
		s += fmt.Sprintf("; raised %s -> %s after %s (%s)", r.From, r.To, r.After, r.Why)
	}
	return s
}

// timeoutPerTTL: a worker's deadline is at least this many TTLs (its
// waits for leases of killed workers, its pauses, its steps).
const timeoutPerTTL = 60

// WithTTL returns t with another lease TTL and what follows from it.
func (t Timing) WithTTL(ttl time.Duration, fixedClaim bool) Timing {
	old := t.LeaseTTL
	t.LeaseTTL = ttl
	if !fixedClaim {
		t.ClaimTTL = ttl + 50*time.Millisecond
	} else if old > 0 {
		t.ClaimTTL = t.ClaimTTL * ttl / old
	}
	t.ProcessTimeout = max(t.ProcessTimeout, timeoutPerTTL*ttl)
	return t
}

// CalibrationCase is a fault-free case whose worker runs the standard
// script: its step latencies, measured with as many copies running at once
// as the matrix will run, say how slow the backend is on this machine now.
func CalibrationCase(i int) Case {
	return Case{ID: fmt.Sprintf("calibrate-%d", i), System: faults.Ingestion, Class: "calibration",
		Description: "fault-free run of the standard script, to measure step latency before the matrix",
		Steps:       []Step{{Worker: "calibrate", Actions: StandardScript()}}}
}

// ForTTL returns the case with its pause lengths rescaled from the TTL the
// case was built for to ttl, so that a pause past the lease (or around it)
// stays past (or around) the lease in use.
func (c Case) ForTTL(ttl time.Duration) Case {
	if c.TTLMillis <= 0 || ttl <= 0 || ttl.Milliseconds() == c.TTLMillis {
		return c
	}
	from, to := c.TTLMillis, ttl.Milliseconds()
	out := c
	out.TTLMillis = to
	out.Steps = make([]Step, len(c.Steps))
	for i, st := range c.Steps {
		out.Steps[i] = st
		if len(st.Arms) == 0 {
			continue
		}
		arms := make(faults.Arms, len(st.Arms))
		for p, a := range st.Arms {
			if a.Kind == faults.Pause {
				a.PauseFor = time.Duration(int64(a.PauseFor) * to / from)
			}
			arms[p] = a
		}
		out.Steps[i].Arms = arms
	}
	return out
}
