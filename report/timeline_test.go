package report

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The timeline's offsets come from the time each record was written, in
// the history file's order, never from the service's clock: a pause moves
// the harness clock on, so mixing the two ran offsets backwards ("+8 ms"
// then "+-12 ms"). An event's cell shows its own clock as the violations
// quote it.
func TestTimelineOffsetsFollowTheRecordsAndEventsShowTheirClock(t *testing.T) {
	r := verdict.CaseResult{Case: catalogue.Case{ID: "c"}, Timeline: history.Log{
		{Worker: "w", Kind: history.Start, At: 1000, PID: 7, Actions: 1},
		{Worker: "w", Kind: history.Event, At: 1008, Event: &reference.Event{Kind: reference.EvInvoke, DocumentID: "d", At: 5000}},
		{Worker: "x", Kind: history.Event, At: 1010, Event: &reference.Event{Kind: reference.EvLeaseAcquire, DocumentID: "d", Token: 2, At: 4990}},
		{Worker: "w", Kind: history.Exit, At: 1020, Reason: "done"},
	}}
	tl := buildTimeline(r, newOpNames(), nil)
	var at []string
	for _, row := range tl.Rows {
		at = append(at, row.At)
	}
	if got, want := strings.Join(at, " "), "+0 ms +8 ms +10 ms +20 ms"; got != want {
		t.Errorf("offsets %q, want %q", got, want)
	}
	var cells []string
	for _, row := range tl.Rows {
		for _, c := range row.Cells {
			cells = append(cells, string(c.HTML))
		}
	}
	all := strings.Join(cells, "\n")
	for _, want := range []string{`<span class="clock">@5000</span>`, `<span class="clock">@4990</span>`} {
		if !strings.Contains(all, want) {
			t.Errorf("no %s in the event cells:\n%s", want, all)
		}
	}
}
