package casefaults

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs/cut"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Durable steps of a database server: with --backend containers (server
// faults and power loss on) each server's data directory is a lazy mount
// the supervisor serves, so it sees every fsync, fdatasync, rename, link
// and unlink the server makes. While the worker is inside a store call
// (its call mark, as for a store process), each such operation of the
// server counts against that call; a case with DurableKill.Server kills
// the server (SIGKILL to its container) right after the k-th, before the
// server learns its sync returned, then starts it again on its data: a
// server crash inside its own I/O, at a step the case names, where a
// server-crash fault kills it at a window of the worker and a wall-clock
// kill wherever the clock puts it. The worker is not killed: it sees its
// server fail and goes on; recovery and the invariants follow.

// ServerDurable is what a server backend's ServerFaults implements when
// its servers' data directories are on lazy mounts it can watch
// (sim/servers/serverfaults, with provision's power-loss mounts).
type ServerDurable interface {
	// WatchDurable has fn told of every durable file operation on the
	// server's data mount, once done and before the server learns so
	// (nil stops); an error says why the server cannot be watched.
	WatchDurable(server string, fn func(cut.DurableOp)) error
	// KillServer kills the server (SIGKILL to all of it, counted as one
	// of its kills) and returns once it is dead.
	KillServer(ctx context.Context, server string) error
	// StartServer starts the killed server again on its data, points the
	// proxies at it and says how long it took.
	StartServer(ctx context.Context, server string) (time.Duration, error)
}

// serverWatch is the server side of a Durable.
type serverWatch struct {
	ctx  context.Context
	sd   ServerDurable
	name string
	// done is closed once the server killed at the step answers again.
	done    chan struct{}
	took    time.Duration
	killErr error
	err     error
}

// durableServer names the server a case's durable-step kill watches ("").
func durableServer(c catalogue.Case) string {
	for _, st := range c.Steps {
		if st.Durable != nil && st.Durable.Server != "" {
			return st.Durable.Server
		}
	}
	return ""
}

// watchServerDurable hears the server's data mount for d.
func (f *Faults) watchServerDurable(ctx context.Context, d *Durable) (*Durable, func(), error) {
	sd, ok := f.run.ServerFaults.(ServerDurable)
	if !ok || f.run.InProcess {
		return nil, nil, fmt.Errorf("durable steps of server %s: this run cannot watch its servers' files (it needs --backend containers with server faults and power loss on, FUSE, and real worker processes)", d.kill.Server)
	}
	d.srv = &serverWatch{ctx: ctx, sd: sd, name: d.kill.Server, done: make(chan struct{})}
	if err := sd.WatchDurable(d.kill.Server, d.op); err != nil {
		return nil, nil, fmt.Errorf("durable steps: %w", err)
	}
	return d, func() { _ = sd.WatchDurable(d.kill.Server, nil) }, nil
}

// crash kills the server's process that made the operation, inside its
// request: the process waits for the request's answer whatever signal it
// gets (FUSE waits out a request it has handed to its server), so it is
// sent SIGKILL now and dies on its way out of the call, before it runs
// another instruction of its own. The whole server is then killed (its
// kill waits for its processes, the answered one among them), and started
// again on its data, while the request is answered.
func (s *serverWatch) crash(op cut.DurableOp) {
	pidErr := syscall.Kill(int(op.Pid), syscall.SIGKILL)
	go func() {
		defer close(s.done)
		if pidErr != nil {
			s.killErr = fmt.Errorf("SIGKILL the server's process %d: %w", op.Pid, pidErr)
			return
		}
		t0 := time.Now()
		if s.killErr = s.sd.KillServer(s.ctx, s.name); s.killErr == nil {
			_, s.err = s.sd.StartServer(s.ctx, s.name)
			s.took = time.Since(t0)
		}
	}()
}

// judge waits for the restart of a server killed at its step and says
// what the kill did; the worker is not killed by it.
func (s *serverWatch) judge(worker, fired string, call int) (string, *verdict.NotExercisedReason) {
	<-s.done
	note := fmt.Sprintf("durable-step kill: server %s SIGKILLed right after %s, its durable step during worker %s's store call %d", s.name, fired, worker, call)
	if err := cmpErr(s.killErr, s.err); err != nil {
		note += ": " + err.Error()
		return note, &verdict.NotExercisedReason{Cause: verdict.CauseServerFault, Detail: note,
			Advice: "the supervisor could not kill the server or start it again on its data: see the server's log"}
	}
	return note + fmt.Sprintf("; it answered again %s after the kill", s.took.Round(time.Millisecond)), nil
}

func cmpErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
