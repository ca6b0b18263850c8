package worker

import (
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
)

// armRandomKill sets up a worker's random-instant kill, if it has one:
// KillAfterMicros after its start, or KillDeltaMicros after its anchor
// record. The kill record says how long after the worker's previous record
// it came (the anchor of a replay). The returned function disarms a kill
// that has not fired.
func armRandomKill(spec WorkerSpec, hist *history.Writer, pid int, began time.Time) (disarm func()) {
	if spec.KillAfterMicros <= 0 && spec.KillAnchor == "" {
		return func() {}
	}
	var mu sync.Mutex
	last, seen := began, 0 // the start record was written just before began
	delta := time.Duration(spec.KillDeltaMicros) * time.Microsecond
	killNow := func() {
		mu.Lock()
		since := time.Since(last)
		mu.Unlock()
		hist.Append(history.Record{Kind: history.Kill, PID: pid, Micros: time.Since(began).Microseconds(), Since: since.Microseconds()})
		// The worker's other goroutines run on until the signal lands:
		// none may start a record the kill could tear.
		hist.Kill()
		KillSelf(faults.Hit{})
	}
	hist.Observe(func(rec history.Record) {
		mu.Lock()
		last = time.Now()
		fire := false
		if spec.KillAnchor != "" && rec.Kind != history.Kill && AnchorLine(rec) == spec.KillAnchor {
			seen++
			fire = seen == spec.KillAnchorIndex
		}
		mu.Unlock()
		if fire {
			time.AfterFunc(delta, killNow)
		}
	})
	var timer *time.Timer
	switch spec.KillAnchor {
	case "":
		timer = time.AfterFunc(time.Duration(spec.KillAfterMicros)*time.Microsecond, killNow)
	case string(history.Start):
		// Killed before its first action: the start record is written.
		timer = time.AfterFunc(delta, killNow)
	}
	return func() {
		if timer != nil {
			timer.Stop()
		}
	}
}

// AnchorLine is the text a kill anchor matches: the record's trace line,
// rendered as the history's trace does (without what differs between
// replays), or "start" for a start record.
func AnchorLine(r history.Record) string {
	if t := history.Trace(history.Log{r}); len(t) > 0 {
		return t[0]
	}
	return string(r.Kind)
}
