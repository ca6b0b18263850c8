package provision

import (
	"fmt"
	"os"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
)

// A durable step of PostgreSQL's own background processes (the WAL
// writer's flush of records no commit has flushed yet, the checkpointer,
// autovacuum) falls in whatever store call is going on when its timer
// fires: it is no step of that call, and a sweep case drawn from it would
// not be exercised on the next run. The durable-step watch of the
// PostgreSQL data mount hears the client backends only; the background
// processes' operations still land on the mount as ever.

// pgBackground are the titles (after "postgres: ") PostgreSQL gives its
// background processes; a client backend's title starts with its user,
// database and client address.
var pgBackground = []string{"walwriter", "checkpointer", "background writer", "autovacuum", "logical replication", "archiver", "stats collector", "walsender", "walreceiver", "startup"}

// pgBackgroundProc reports whether pid is one of PostgreSQL's background
// processes, by the title it sets in its command line.
func pgBackgroundProc(pid uint32) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	title, ok := strings.CutPrefix(strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")), "postgres: ")
	if !ok {
		return false
	}
	for _, p := range pgBackground {
		if strings.HasPrefix(title, p) {
			return true
		}
	}
	return false
}

// pgClientDurable is the OnDurable of PostgreSQL's data mount, leaving out
// the operations of its background processes.
func pgClientDurable(fs *lazyfs.FS) func(func(lazyfs.DurableOp)) {
	return func(fn func(lazyfs.DurableOp)) {
		if fn == nil {
			fs.OnDurable(nil)
			return
		}
		fs.OnDurable(func(op lazyfs.DurableOp) {
			if !pgBackgroundProc(op.Pid) {
				fn(op)
			}
		})
	}
}
