package verdict

import (
	"fmt"
	"strings"
	"time"
)

// ServiceStartRetried begins the note of a case in which the
// supervisor's reader of the service (role read) got no hello within its
// start timeout and was started once more, which answered (a start slowed
// by the machine's load; a second silence leaves the case undecided). A
// worker's retried starts are counted in its WorkerResult.StartRetries.
const ServiceStartRetried = "service start retried: "

// storeStartsLine says how long the workers' stores took to start over a
// run's cases, and how many service starts were retried ("" when no
// worker noted any start).
func storeStartsLine(results []CaseResult) string {
	var d []time.Duration
	retried, cases := 0, 0
	for _, r := range results {
		n := 0
		for _, w := range r.Workers {
			d = append(d, w.StoreStarts...)
			n += w.StartRetries
		}
		for _, note := range r.Notes {
			if strings.HasPrefix(note, ServiceStartRetried) {
				n++
			}
		}
		if n > 0 {
			retried, cases = retried+n, cases+1
		}
	}
	line := ""
	if len(d) > 0 {
		med, _, mx := LatencyStats(d)
		line = fmt.Sprintf("store starts: median %s, max %s over %d worker store opens (not counted in the workers' deadlines)", med.Round(time.Millisecond), mx.Round(time.Millisecond), len(d))
	}
	if retried > 0 {
		what := "1 service start retried"
		if retried > 1 {
			what = fmt.Sprintf("%d service starts retried", retried)
		}
		line = strings.TrimPrefix(line+"; ", "; ") + fmt.Sprintf("%s (cases: %d): no hello within the start timeout, then one on the second start (a second silence is undecided)", what, cases)
	}
	return line
}
