package storeproc

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Starts collects how long store processes took to start (Options.OnStart
// given Starts.Add), for a run's report. Its zero value is ready to use.
type Starts struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one start.
func (s *Starts) Add(took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, took)
}

// Stats returns how many starts were recorded, their median and maximum.
func (s *Starts) Stats() (n int, median, maxD time.Duration) {
	s.mu.Lock()
	d := slices.Clone(s.d)
	s.mu.Unlock()
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	return len(d), d[len(d)/2], d[len(d)-1]
}

// String says "store starts: median X, max Y over N processes".
func (s *Starts) String() string {
	n, med, mx := s.Stats()
	if n == 0 {
		return "store starts: none"
	}
	unit := "processes"
	if n == 1 {
		unit = "process"
	}
	return fmt.Sprintf("store starts: median %s, max %s over %d %s", med.Round(time.Millisecond), mx.Round(time.Millisecond), n, unit)
}
