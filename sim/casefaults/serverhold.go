package casefaults

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// pastLease is ServerCase.PastLease for case c, whose history file is
// history: the faults that hold a worker's request past its lease
// (server-pause, partition, clock-jump) move the case's harness clock a
// long pause on (LongPause: twice the TTL and a little), as a worker's
// own pause past its lease does; with the wall clock, the fault holds
// that long instead.
func (f *Faults) pastLease(c catalogue.Case, history string) func() (moved, hold time.Duration) {
	ttl := c.TTLMillis
	if ttl <= 0 {
		ttl = f.run.LeaseTTL().Milliseconds()
	}
	d := catalogue.Lease(time.Duration(ttl) * time.Millisecond).LongPause()
	if f.run.WallClock || f.run.InProcess {
		return func() (time.Duration, time.Duration) { return 0, d }
	}
	path := filepath.Join(filepath.Dir(history), worker.ClockFile)
	return func() (time.Duration, time.Duration) {
		clk, err := worker.OpenClock(path)
		if err != nil {
			// No harness clock to move: hold in wall time.
			return 0, d
		}
		defer clk.Close()
		clk.AdvanceTo(clk.Now() + d.Milliseconds())
		return d, 0
	}
}

// actsOnWholeServer reports whether c stops a server or moves its clock
// (server-pause, clock-jump): every case's connections to it would feel
// that, so the case runs alone, as a power loss does. A partition cuts
// only the case's own proxy.
func actsOnWholeServer(c catalogue.Case) bool {
	a, ok := serverFaultOf(c)
	return ok && (a.Kind == faults.ServerPause || a.Kind == faults.ClockJump)
}

// ReleaseFile is the file the supervisor writes when the background
// worker of step phase may go on (the next foreground worker is done), in
// the folder of the case whose history file is history.
func ReleaseFile(history string, phase int) string {
	return filepath.Join(filepath.Dir(history), fmt.Sprintf("release-%d", phase))
}
