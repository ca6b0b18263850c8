package verdict

import (
	"slices"
	"time"
)

// LatencyStats returns the median, 99th percentile and maximum of d.
func LatencyStats(d []time.Duration) (median, p99, maxD time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)], s[len(s)-1]
}
