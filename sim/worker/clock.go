package worker

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The harness clock of the process mode: the time the workers of one case
// use for leases, claims, backoff and pauses, shared through an 8-byte
// file the supervisor creates in the case's folder and every worker maps
// into its memory. It moves only when a worker sleeps or stalls (as the
// in-process mode's simClock does), never because a step was slow: a
// case's lease arithmetic no longer depends on how busy the machine is,
// and a pause past a lease costs no real time. Deadlines that catch hung
// workers stay on the wall clock. Stores get the time from the service
// (TryAcquire, Claim take now); a store that compared lease expiry with a
// clock of its own (a database server's now()) would need the wall clock
// (Config.WallClock).

// ClockFile is the name of the harness clock's file in a case's folder.
const ClockFile = "clock"

// CreateClock writes a case's clock file, starting at start (unix ms).
func CreateClock(path string, start int64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(start))
	if err := os.WriteFile(path, b[:], 0o644); err != nil {
		return fmt.Errorf("harness clock: %w", err)
	}
	return nil
}

// sharedClock is a worker's view of the case's harness clock.
type sharedClock struct {
	mem []byte
	ms  *int64
}

// OpenClock maps the case's clock file.
func OpenClock(path string) (*sharedClock, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("harness clock: %w", err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("harness clock %s: mmap: %w", path, err)
	}
	return &sharedClock{mem: mem, ms: (*int64)(unsafe.Pointer(&mem[0]))}, nil
}

// Now is the clock's time in unix milliseconds.
func (c *sharedClock) Now() int64 { return atomic.LoadInt64(c.ms) }

// Sleep moves the clock d on (at least a millisecond) at once.
func (c *sharedClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	atomic.AddInt64(c.ms, max(d.Milliseconds(), 1))
	return nil
}

// AdvanceTo moves the clock to t unless it is already past it.
func (c *sharedClock) AdvanceTo(t int64) {
	for {
		now := atomic.LoadInt64(c.ms)
		if now >= t || atomic.CompareAndSwapInt64(c.ms, now, t) {
			return
		}
	}
}

// pause is a stall of d on the harness clock: a background worker first
// waits for the supervisor's release (the next foreground worker is done),
// then the clock is at least d past the stall's start.
func (c *sharedClock) pause(ctx context.Context, release string, d time.Duration) {
	start := c.Now()
	if release != "" {
		waitRelease(ctx, release, 0)
	}
	c.AdvanceTo(start + d.Milliseconds())
}

// Close unmaps the clock.
func (c *sharedClock) Close() { _ = syscall.Munmap(c.mem) }

// ClockNow is the time on a case's harness clock (path), read by a process
// that does not map it (the supervisor); the wall clock when there is none.
func ClockNow(path string) int64 {
	if path != "" {
		if b, err := os.ReadFile(path); err == nil && len(b) == 8 {
			return int64(binary.LittleEndian.Uint64(b))
		}
	}
	return time.Now().UnixMilli()
}
