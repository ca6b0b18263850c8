package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Files of the case's folder a worker waits for or counts in, besides
// those it maps (clock.go, marks.go) and appends to (deadholder.go,
// starts.go).

// waitRelease is a process worker's pause: stall d, then until the
// supervisor releases it (so the interleaving is the same on every run).
func waitRelease(ctx context.Context, file string, d time.Duration) {
	t := time.NewTimer(d)
	select {
	case <-ctx.Done():
		t.Stop()
		return
	case <-t.C:
	}
	if file == "" {
		return
	}
	// A release comes once the next foreground worker is done, which on a
	// stalled server can take minutes; the supervisor kills a worker that
	// waits past its deadline (and Pdeathsig one whose supervisor died),
	// so this bound only keeps a worker from waiting for ever.
	deadline := time.Now().Add(30*time.Minute + 10*d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, err := os.Stat(file); err == nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// CallLogFile is the file of the case's model-call log (under dir) that
// counts the calls for one operationId.
func CallLogFile(dir, op string) string {
	return filepath.Join(dir, strings.NewReplacer("/", "_", "\x00", "_").Replace(op))
}
