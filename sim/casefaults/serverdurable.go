package casefaults

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
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
	// PowerOffServer is the instant the power of the server's data mount
	// goes: nothing the server changes there afterwards survives the
	// CutServer that follows (lazyfs.FS.PowerOff).
	PowerOffServer(server string) error
	// CutServer throws away, torn as t says, what the killed server left
	// un-synced on its data mount, and brings the mount's power back.
	CutServer(server string, t cut.Tear) (cut.Loss, error)
}

// serverWatch is the server side of a Durable.
type serverWatch struct {
	ctx  context.Context
	sd   ServerDurable
	name string
	// power cuts the power of the server's data mount at the step too,
	// torn as tear says (DurableKill.Power, Tear).
	power bool
	tear  cut.Tear
	// done is closed once the server killed at the step answers again.
	done    chan struct{}
	took    time.Duration
	loss    cut.Loss
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
	d.srv = &serverWatch{ctx: ctx, sd: sd, name: d.kill.Server, done: make(chan struct{}), power: d.kill.Power}
	if d.kill.Tear > 0 {
		// The seed of the case's first torn power loss, as the worker
		// sweep's (tearOf).
		d.srv.tear = cut.Tear{Unit: d.kill.Tear, Seed: catalogue.TearSeed(faults.Point(catalogue.DurableStepName(d.kill)), 0)}
	}
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
// again on its data, while the request is answered. With power, the
// power of the server's data mount goes first, at this instant (nothing
// the server's other processes write or sync while they are killed
// survives), and once the server is dead what it had not synced is thrown
// away (torn) before it starts again.
func (s *serverWatch) crash(op cut.DurableOp) {
	if s.power {
		if err := s.sd.PowerOffServer(s.name); err != nil {
			// Nothing is killed: the case is not exercised.
			s.killErr = fmt.Errorf("cut the power of the server's data mount: %w", err)
			close(s.done)
			return
		}
	}
	pidErr := syscall.Kill(int(op.Pid), syscall.SIGKILL)
	go func() {
		defer close(s.done)
		t0 := time.Now()
		switch {
		case pidErr != nil:
			s.killErr = fmt.Errorf("SIGKILL the server's process %d: %w", op.Pid, pidErr)
		default:
			s.killErr = s.sd.KillServer(s.ctx, s.name)
		}
		if s.power {
			// The power comes back even when the kill failed: a mount
			// left off would refuse the server every write.
			var cutErr error
			s.loss, cutErr = s.sd.CutServer(s.name, s.tear)
			s.killErr = cmpErr(s.killErr, cutErr)
		}
		if s.killErr == nil {
			_, s.err = s.sd.StartServer(s.ctx, s.name)
			s.took = time.Since(t0)
		}
	}()
}

// judge waits for the restart of a server killed at its step and says
// what the kill did; the worker is not killed by it. A torn power cut
// that found nothing un-synced to tear was a plain one: not exercised.
func (s *serverWatch) judge(worker, fired string, call int) (string, *verdict.NotExercisedReason) {
	<-s.done
	what := fmt.Sprintf("durable-step kill: server %s SIGKILLed", s.name)
	if s.power {
		what = fmt.Sprintf("durable-step power loss: server %s SIGKILLed and the power of its data mount cut", s.name)
	}
	note := fmt.Sprintf("%s right after %s, its durable step during worker %s's store call %d", what, fired, worker, call)
	if err := cmpErr(s.killErr, s.err); err != nil {
		note += ": " + err.Error()
		return note, &verdict.NotExercisedReason{Cause: verdict.CauseServerFault, Detail: note,
			Advice: "the supervisor could not kill the server or start it again on its data: see the server's log"}
	}
	if s.power {
		note += fmt.Sprintf("; %d bytes and %d directory entries of its data directory that were not synced thrown away%s", s.loss.Bytes, s.loss.Names, tornNote(s.loss))
	}
	note += fmt.Sprintf("; it answered again %s after the kill", s.took.Round(time.Millisecond))
	if s.loss.Torn && s.loss.Kept == 0 {
		return note, &verdict.NotExercisedReason{Cause: verdict.CauseNothingToTear,
			Detail: fmt.Sprintf("the torn power cut of server %s after %s found nothing written and not synced to tear: it was a plain power loss", s.name, fired),
			Advice: "what a server leaves un-synced at a step changes with its background writes: the case runs again; the power-loss case at the same step covers the cut"}
	}
	return note, nil
}

func cmpErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
