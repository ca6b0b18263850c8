package bench

import (
	"strings"
	"testing"
	"time"
)

// The line for a floor ratio not met splits the median round's CPU per
// worker into the bare start, the work past it and the supervisor's share,
// each as a multiple of the empty Go binary's start.
func TestFloorSplitSaysWhereTheCPUWent(t *testing.T) {
	rounds := []floorSplit{
		{ratio: 9, workers: 100, cpu: 900 * time.Millisecond, supervisor: 100 * time.Millisecond, floor: 100 * time.Millisecond, start: 200 * time.Millisecond},
		{ratio: 7, workers: 100, cpu: 700 * time.Millisecond, supervisor: 100 * time.Millisecond, floor: 100 * time.Millisecond, start: 200 * time.Millisecond},
		{ratio: 8, workers: 100, cpu: 800 * time.Millisecond, supervisor: 200 * time.Millisecond, floor: 100 * time.Millisecond, start: 200 * time.Millisecond},
	}
	got := medianSplit(rounds).String()
	for _, want := range []string{"median round (8.00x)", "the empty Go binary's start 1ms", "bare start 2ms (2.00x the floor)",
		"past its start 4ms (4.00x", "the supervisor 2ms (2.00x", "would leave the round at 4.00x", "down to 4ms per worker together", "perf record"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}
