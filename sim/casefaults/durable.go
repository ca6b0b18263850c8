package casefaults

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs/cut"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/internal/procstat"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/execmode"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// Durable steps: crashes found from a store's own file-system calls, not
// declared by it.
//
// A store that takes two durable steps in one call (an operation row in
// one transaction, its plan in a second) has a crash window between them
// whether or not it declares one (faults.At, the protocol's "at"). The
// case's lazy mount (faults/lazyfs) sees every fsync, fdatasync, rename,
// link and unlink a process of the case makes; the worker tells which of
// its store calls it is in through a small file it maps (callMark); the
// supervisor, serving the mount, counts the durable operations of the
// worker's session (the worker leads it; its store processes lead groups
// of their own in it; the worker itself writes for an embedded database)
// per store call (Durable).
//
// The probe (probe-durable, on a lazy mount) counts them for the standard
// script's fault worker; the sweep (DurableStepCases) has, for each store
// method whose call takes two durable steps or more, and each gap k
// between them, a case in which the supervisor SIGKILLs the worker's
// session right after the k-th step of that call, before the caller
// learns it returned; then the quiesce step recovers and the invariants
// judge, as after any crash. A case whose call never reaches its k-th step
// is not exercised. Writes with O_SYNC, msync and a server reached over
// the network are not seen (lazyfs.OnDurable).

// storeMethods are the store calls a worker's call mark names
// (sim/worker/marks.go), by their index (from 1).
var storeMethods = worker.StoreMethods()

// Durable is the supervisor's side: it hears the case's lazy mount
// (lazyfs.FS.OnDurable) while the marked worker runs.
type Durable struct {
	file string
	kill catalogue.DurableKill
	mu   sync.Mutex
	seen []catalogue.DurableCall
	// fired is the operation the kill followed ("" until it fires).
	fired string
	// disk is the disk error of a durable-step disk case (kill.Disk).
	disk *Disk
	// srv is the server watched and killed (Server), nil for the
	// worker's own files.
	srv *serverWatch
}

// readMark reads the worker's process group and current call.
func (d *Durable) readMark() (pgid int, call int, method string) {
	b, err := os.ReadFile(d.file)
	if err != nil || len(b) != worker.CallMarkSize {
		return 0, 0, ""
	}
	pgid = int(binary.LittleEndian.Uint64(b[:8]))
	v := int64(binary.LittleEndian.Uint64(b[8:]))
	if i := int(v&0xff) - 1; i >= 0 && i < len(storeMethods) {
		method = storeMethods[i]
	}
	return pgid, int(v >> 8), method
}

// op counts one durable operation of the mount; it kills the worker's
// group when it is the step the case names.
func (d *Durable) op(op cut.DurableOp) {
	pgid, call, method := d.readMark()
	if pgid <= 1 || call == 0 {
		return
	}
	// A worker leads its own session (and group); a store process it
	// starts leads a group of its own in that session. A server's
	// processes are the server's: each of its operations while the
	// worker is inside a call counts.
	var st procstat.Stat
	if d.srv == nil {
		var err error
		if st, err = procstat.Read(int(op.Pid)); err != nil || (st.PGRP != pgid && !worker.InSession(st, pgid)) {
			return
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := len(d.seen); n == 0 || d.seen[n-1].Call != call {
		hit := 1 + len(slices.DeleteFunc(slices.Clone(d.seen), func(c catalogue.DurableCall) bool { return c.Method != method }))
		d.seen = append(d.seen, catalogue.DurableCall{Call: call, Method: method, Hit: hit})
	}
	c := &d.seen[len(d.seen)-1]
	c.Ops = append(c.Ops, op.String())
	if d.kill.Targets(*c) && d.kill.Step == len(c.Ops) && d.fired == "" && d.kill.Disk == "" {
		d.fired = op.String()
		// The operation is done; its caller has not learnt so, and
		// never will.
		if d.srv != nil {
			d.srv.crash(op)
			return
		}
		_ = syscall.Kill(-st.PGRP, syscall.SIGKILL)
		execmode.KillSession(pgid, true)
	}
}

// WatchDurable arms the durable-step watch of step st of a case: it makes
// the mark file the worker maps (spec.DurableFile) and hears the case's
// lazy mount (or, for a server's steps, the server's) until the returned
// function runs.
func (f *Faults) WatchDurable(ctx context.Context, pc *Power, st catalogue.Step, dir string, spec *worker.WorkerSpec) (*Durable, func(), error) {
	if st.Durable == nil {
		return nil, func() {}, nil
	}
	if st.Durable.Server == "" && (pc == nil || pc.fs == nil) {
		return nil, nil, fmt.Errorf("durable steps: the case's data is on no lazy mount")
	}
	path := fmt.Sprintf("%s/durable-%d", dir, spec.Phase)
	if err := os.WriteFile(path, make([]byte, worker.CallMarkSize), 0o644); err != nil {
		return nil, nil, fmt.Errorf("durable steps: %w", err)
	}
	spec.DurableFile = path
	d := &Durable{file: path, kill: *st.Durable}
	if st.Durable.Server != "" {
		return f.watchServerDurable(ctx, d)
	}
	if d.kill.Disk != "" {
		if err := watchDurableDisk(pc, st, spec, d); err != nil {
			return nil, nil, err
		}
	}
	pc.fs.OnDurable(d.op)
	return d, func() { pc.fs.OnDurable(nil) }, nil
}

// Kill is the durable-step kill the watch carries out.
func (d *Durable) Kill() catalogue.DurableKill { return d.kill }

// Calls returns what the watch counted.
func (d *Durable) Calls() []catalogue.DurableCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seen)
}

// Judge says what the kill of a case did: a note, and why the case is not
// exercised when the worker never reached the step (nil when it did).
func (d *Durable) Judge(worker string, exit string) (string, *verdict.NotExercisedReason) {
	k := d.kill
	if k.Disk != "" {
		return d.judgeDisk(worker)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fired != "" {
		call := 0
		for _, c := range d.seen {
			if k.Targets(c) {
				call = c.Call
			}
		}
		if d.srv != nil {
			return d.srv.judge(worker, d.fired, call)
		}
		note := fmt.Sprintf("durable-step kill: worker %s's session SIGKILLed right after %s, durable step %d of its store call %d (%s)", worker, d.fired, k.Step, call, k.Method)
		if !strings.HasPrefix(exit, "killed") {
			note += fmt.Sprintf(", but the worker exited %q", exit)
			return note, &verdict.NotExercisedReason{Cause: verdict.CauseNotKilled, Detail: note,
				Advice: "the kill did not end the worker: check that nothing of the worker left its session"}
		}
		return note, nil
	}
	took, what := 0, fmt.Sprintf("its store call %d (%s)", k.Call, k.Method)
	if k.Hit > 0 {
		what = fmt.Sprintf("call %d of %s with a durable step", k.Hit, k.Method)
	}
	for _, c := range d.seen {
		if k.Targets(c) {
			took, what = len(c.Ops), what+fmt.Sprintf(" (its store call %d)", c.Call)
		}
	}
	whose, where := "worker "+worker, "the lazy mount"
	if k.Server != "" {
		whose, where = fmt.Sprintf("server %s during worker %s's calls", k.Server, worker), fmt.Sprintf("server %s's data mount", k.Server)
	}
	note := fmt.Sprintf("durable-step kill of %s never fired: %s took %d durable steps on %s, the case kills after step %d", whose, what, took, where, k.Step)
	return note, &verdict.NotExercisedReason{Cause: verdict.CauseUnreachable, Detail: note,
		Advice: "the store took fewer file syncs, renames or unlinks in that call than in the probe run (a database checkpoint, or a call that found its work done): run the matrix again; a store that syncs a different number of times on every run moves the steps"}
}

// watchesDurable reports whether a step of c watches durable steps.
func watchesDurable(c catalogue.Case) bool {
	return slices.ContainsFunc(c.Steps, func(st catalogue.Step) bool { return st.Durable != nil })
}

// StoreMethods are the store calls a durable-step kill can name.
func StoreMethods() []string { return worker.StoreMethods() }

// DurableSweepable says whether the runner can watch durable steps: worker
// processes whose stores keep their files on the case's lazy mount.
func (f *Faults) DurableSweepable() bool {
	return !f.run.InProcess && f.run.Backend.Embedded && f.PowerLossUntested() == ""
}

// DurablePower cuts the power of the case's lazy mount after a durable-step
// kill that asks for it and fired (the worker's group is dead). A server's
// power cut at its step is the server watch's (serverWatch.crash).
func (f *Faults) DurablePower(ctx context.Context, pc *Power, c catalogue.Case, env worker.CaseEnv, space string, cx execmode.Case, worker string, d *Durable, res *verdict.CaseResult) error {
	d.mu.Lock()
	fired := d.fired != ""
	d.mu.Unlock()
	if !d.kill.Power || !fired || d.srv != nil {
		return nil
	}
	h, err := cx.History()
	if err != nil {
		return err
	}
	cut := &faults.Action{Kind: faults.PowerLoss}
	if d.kill.Tear > 0 {
		cut = &faults.Action{Kind: faults.TornWrite, Tear: faults.ActionTear(d.kill.Tear)}
	}
	hit := history.Record{Kind: history.Hit, Worker: worker, Point: faults.Point(catalogue.DurableStepName(d.kill)), Fault: cut}
	f.cutLazy(ctx, pc, c, env, space, h, hit, res)
	pc.done++
	return nil
}
