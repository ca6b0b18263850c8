package verdict

import (
	"fmt"
	"time"
)

// storeStartsLine says how long the workers' stores took to start over a
// run's cases ("" when no worker noted any).
func storeStartsLine(results []CaseResult) string {
	var d []time.Duration
	for _, r := range results {
		for _, w := range r.Workers {
			d = append(d, w.StoreStarts...)
		}
	}
	if len(d) == 0 {
		return ""
	}
	med, _, mx := LatencyStats(d)
	return fmt.Sprintf("store starts: median %s, max %s over %d worker store opens (not counted in the workers' deadlines)", med.Round(time.Millisecond), mx.Round(time.Millisecond), len(d))
}
