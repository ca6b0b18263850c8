package execmode

import (
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// A worker started under timings the run has since raised gets the raised
// deadline: it is not killed at the one it started with.
func TestDeadlineFollowsRaisedTiming(t *testing.T) {
	cmd, exited := standInWorker(t)
	var timeout atomic.Int64
	timeout.Store(int64(300 * time.Millisecond))
	m := New(Run{ProcessTimeout: func() time.Duration { return time.Duration(timeout.Load()) }})
	var timedOut atomic.Bool
	start := time.Now()
	go m.watchDeadline(cmd.Process.Pid, 300*time.Millisecond, "", exited, &timedOut, nil)
	time.Sleep(100 * time.Millisecond)
	timeout.Store(int64(1500 * time.Millisecond)) // the run's timings raised
	select {
	case <-exited:
		t.Fatalf("killed after %s, at the deadline it started with", time.Since(start))
	case <-time.After(time.Second):
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("not killed at the raised deadline")
	}
	if took := time.Since(start); took < 1500*time.Millisecond || !timedOut.Load() {
		t.Fatalf("killed after %s (timed out %v), want at the raised 1.5s deadline", took, timedOut.Load())
	}
}

// A worker's deadline counts from when its stores answered (its starts
// file, Backend.StartTimeout): a store that takes longer to start than
// the whole deadline does not get the worker killed; one whose start never
// ends is counted up to StartTimeout only. Nor does the time a worker
// spends parked by a pause.
func TestDeadlineCountsFromTheStoresStart(t *testing.T) {
	run := func(t *testing.T, write func(path string)) time.Duration {
		t.Helper()
		cmd, exited := standInWorker(t)
		m := New(Run{Backend: worker.Backend{StartTimeout: 2 * time.Second}, ProcessTimeout: func() time.Duration { return 300 * time.Millisecond }})
		path := filepath.Join(t.TempDir(), "worker-1-w.starts")
		var timedOut atomic.Bool
		start := time.Now()
		go m.watchDeadline(cmd.Process.Pid, 300*time.Millisecond, path, exited, &timedOut, nil)
		go write(path)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("not killed at its deadline")
		}
		if !timedOut.Load() {
			t.Fatal("the worker ended without timing out")
		}
		return time.Since(start)
	}
	// A span of 1s, over three times the deadline: the stores' start
	// (worker.NoteOpen), or a background worker parked by a pause (worker.NotePause)
	// waiting for the next foreground worker (its JVM's start, its
	// work), which is not the parked worker's hang. A span that never
	// ends counts up to its limit: the start limit (2s), or what the
	// foreground worker may take (its 300ms deadline and its start).
	for _, c := range []struct {
		name  string
		note  func(string) func()
		limit time.Duration
	}{{"start", worker.NoteOpen, 2 * time.Second}, {"parked by a pause", worker.NotePause, 2300 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			took := run(t, func(path string) {
				end := c.note(path)
				time.Sleep(time.Second)
				end()
			})
			if took < 1300*time.Millisecond {
				t.Fatalf("killed after %s: the 1s span counted against the 300ms deadline", took)
			}
		})
		t.Run(c.name+" that never ends", func(t *testing.T) {
			took := run(t, func(path string) { c.note(path) })
			if want := 300*time.Millisecond + c.limit; took < want || took > want+3*time.Second {
				t.Fatalf("killed after %s, want at the 300ms deadline plus the %s limit", took, c.limit)
			}
		})
	}
}

// standInWorker starts a sleep process in a group of its own to stand for
// a worker; exited closes when it has been reaped.
func standInWorker(t *testing.T) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a sleep process to stand for a worker: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return cmd, exited
}
