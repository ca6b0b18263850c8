package sim

import (
	"fmt"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// ProgressEvery is the longest a progress log stays silent.
const ProgressEvery = 10 * time.Second

// ProgressLog prints a run's progress as plain lines, for an output that
// is not a terminal (a CI log, a file, go test -v): one line at each tenth
// of the run and at least one every ProgressEvery, each with the cases
// done of the total, the failures so far and the time elapsed:
//
//	certify: 12/120 cases (10%), 0 failed, 8s elapsed
//
// A run whose size is not known beforehand (explore under a time budget)
// has its tenths in time instead. Its methods may be called from any
// goroutine; Stop ends it.
type ProgressLog struct {
	print func(line string)
	what  string // "certify"
	unit  string // "cases"
	total int    // 0: not known

	mu          sync.Mutex
	now         func() time.Time
	start, last time.Time
	every       time.Duration
	done, fails int
	tenth       int
	stopped     bool
	stop        chan struct{}
}

// NewProgressLog starts the progress log of a run named what (the first
// word of each line) of total units (cases, schedules; 0 when not known,
// budget then being the run's time budget, if any), printing each line
// with print.
func NewProgressLog(print func(line string), what, unit string, total int, budget time.Duration) *ProgressLog {
	p := newProgressLog(print, what, unit, total, budget, time.Now)
	go p.tick(time.Second)
	return p
}

// newProgressLog is NewProgressLog on a clock, with no ticker: the tests
// call check themselves.
func newProgressLog(print func(line string), what, unit string, total int, budget time.Duration, now func() time.Time) *ProgressLog {
	p := &ProgressLog{print: print, what: what, unit: unit, total: total, now: now, every: ProgressEvery, stop: make(chan struct{})}
	if total <= 0 && budget > 0 {
		p.every = min(p.every, budget/10)
	}
	p.start = now()
	p.last = p.start
	return p
}

// Done counts one unit done, failed or not, and prints a line when the
// run has passed another tenth.
func (p *ProgressLog) Done(failed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if failed {
		p.fails++
	}
	if p.total <= 0 {
		return
	}
	if t := p.done * 10 / p.total; t > p.tenth {
		p.tenth = t
		p.line()
	}
}

// Case is Done for a case's result: failed when it broke an invariant.
func (p *ProgressLog) Case(r verdict.CaseResult) { p.Done(r.Verdict == verdict.Fail) }

// Stop ends the log: no line after it returns.
func (p *ProgressLog) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.stopped = true
		close(p.stop)
	}
}

// tick checks the log every period until Stop.
func (p *ProgressLog) tick(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.check()
		}
	}
}

// check prints a line if none was printed for p.every.
func (p *ProgressLog) check() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.now().Sub(p.last) >= p.every {
		p.line()
	}
}

// line prints the progress line (p.mu held).
func (p *ProgressLog) line() {
	if p.stopped {
		return
	}
	p.last = p.now()
	elapsed := p.last.Sub(p.start).Round(time.Second)
	if p.total > 0 {
		p.print(fmt.Sprintf("%s: %d/%d %s (%d%%), %d failed, %s elapsed", p.what, p.done, p.total, p.unit, p.done*100/p.total, p.fails, elapsed))
		return
	}
	p.print(fmt.Sprintf("%s: %d %s, %d failed, %s elapsed", p.what, p.done, p.unit, p.fails, elapsed))
}
