package bench

import (
	"fmt"
	"slices"
	"time"
)

// floorSplit is where one matrix round's CPU went, next to the floor
// measured right after it: the round's CPU (workers and supervisor), the
// supervisor's own, the empty Go binary's starts and the worker binary's
// bare starts, as many of each as the round ran workers.
type floorSplit struct {
	ratio                         float64 // cpu over floor
	workers                       int
	cpu, supervisor, floor, start time.Duration
}

// medianSplit is the round whose ratio to its floor is the median.
func medianSplit(splits []floorSplit) floorSplit {
	s := slices.Clone(splits)
	slices.SortFunc(s, func(a, b floorSplit) int {
		switch {
		case a.ratio < b.ratio:
			return -1
		case a.ratio > b.ratio:
			return 1
		}
		return 0
	})
	return s[len(s)/2]
}

// String says, per worker process, what the round spent against what the
// floor spent: the worker's bare start, the worker's work past it, the
// supervisor's share; and the multiple of the floor each part alone is.
func (f floorSplit) String() string {
	n := time.Duration(max(f.workers, 1))
	floor := f.floor / n
	start := f.start / n
	work := max((f.cpu-f.supervisor)/n-start, 0)
	sup := f.supervisor / n
	x := func(d time.Duration) float64 { return d.Seconds() / max(floor.Seconds(), 1e-9) }
	return fmt.Sprintf("in the median round (%.2fx), per worker process: the empty Go binary's start %s of CPU; the worker binary's bare start %s (%.2fx the floor), the worker's work past its start %s (%.2fx: opening the case's SQLite file, preparing and running its statements, the protocol, the history), the supervisor %s (%.2fx: starting the processes, reading each case's database and history back, checking); a worker that did nothing past its start would leave the round at %.2fx, so the <= 6x target needs the work and the supervisor's share down to %s per worker together (profile: perf record -g over bench --matrix-only, docs/performance.md: Where the matrix's time goes)",
		f.ratio, floor.Round(time.Microsecond), start.Round(time.Microsecond), x(start), work.Round(time.Microsecond), x(work), sup.Round(time.Microsecond), x(sup),
		x(start+sup), max(6*floor-start, 0).Round(time.Microsecond))
}
