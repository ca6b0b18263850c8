package casefaults

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs/cut"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/execmode"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// Disk errors (faults.DiskKinds: fsync-error, disk-full, slow-sync) at a
// window: the worker goes on past the window, on a disk that now fails.
// The case's data directory is on its lazy mount, as for a power loss.
// The worker says it reached the window through a small file it maps
// (diskMark, worker.WorkerSpec.DiskFile); the supervisor, serving the mount,
// reads it before each operation a disk error acts on
// (lazyfs.FS.BeforeIO) and arms the error on the mount then, so the
// error hits the worker's next write or fsync. When the worker ends, the
// supervisor disarms it (space comes back), and after an fsync-error or
// a disk-full that fired it cuts the power of the mount: whatever the
// store acknowledged must be durable (I9), and what the failed syncs
// dropped is gone. Then recovery runs. A slow sync makes its data
// durable, then moves the harness clock past the lease (sleeps, with the
// wall clock) before the fsync returns: the store call outlives its
// lease, and the holder must be fenced at its next step.

// diskFaultOf returns the disk error step st arms, if any.
func diskFaultOf(st catalogue.Step) (faults.Point, faults.Action, bool) {
	for p, a := range st.Arms {
		if a.Kind.IsDisk() {
			return p, a, true
		}
	}
	return "", faults.Action{}, false
}

// armsDiskFault reports whether any step of c arms a disk error.
func armsDiskFault(c catalogue.Case) bool {
	return slices.ContainsFunc(c.Steps, func(st catalogue.Step) bool { _, _, ok := diskFaultOf(st); return ok })
}

// diskMount is what the disk errors need of the case's lazy mount (a
// *lazyfs.FS), or of the servers' data mounts (ServerDisk).
type diskMount = cut.DiskErrors

// Disk is the supervisor's side of one worker's disk error.
type Disk struct {
	worker string
	// file is the worker's mark; without one, trigger says when to arm
	// (a disk error at a durable step: Durable.atStep).
	file    string
	trigger func() bool
	point   faults.Point
	action  faults.Action
	fs      diskMount
	// slow is what a slow sync does before it returns (moves the
	// harness clock, or sleeps).
	slow func()
	// unreleased: a background worker's slow sync held until its limit,
	// its release not come (sim/casefaults/slowsync.go).
	unreleased atomic.Bool
	mu         sync.Mutex
	armed      bool
	// before is what the mount's disk errors had done when the step
	// began.
	before cut.DiskStats
}

// asked reads the mark: the disk kind the worker asked for, if any (at
// a durable step: the kind, once armed).
func (d *Disk) asked() (faults.Kind, bool) {
	if d.trigger != nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.action.Kind, d.armed
	}
	b, err := os.ReadFile(d.file)
	if err != nil || len(b) != worker.DiskMarkSize {
		return "", false
	}
	i := int(binary.LittleEndian.Uint64(b)) - 1
	if i < 0 || i >= len(faults.DiskKinds) {
		return "", false
	}
	return faults.DiskKinds[i], true
}

// arm reads the mark and arms the error it asks for, once.
func (d *Disk) arm() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.armed {
		return
	}
	k, ok := d.action.Kind, d.trigger != nil && d.trigger()
	if d.trigger == nil {
		k, ok = d.asked()
	}
	if !ok {
		return
	}
	d.armed = true
	switch k {
	case faults.FsyncError:
		d.fs.FailNextSync()
	case faults.DiskFull:
		d.fs.SetFull(true)
	case faults.SlowSync:
		d.fs.SlowNextSync(func(cut.DurableOp) { d.slow() })
	}
}

// armDisks is the case's lazy mount's BeforeIO hook while disk errors
// are watched: each worker's mark is read until its error is armed.
func (pc *Power) armDisks() {
	pc.diskMu.Lock()
	ds := slices.Clone(pc.disks)
	pc.diskMu.Unlock()
	for _, d := range ds {
		d.arm()
	}
}

// WatchDisk arms the disk error step st of a case asks for: it makes the
// mark file the worker maps (spec.DiskFile) and hears the case's lazy
// mount until the returned function runs.
func (f *Faults) WatchDisk(pc *Power, st catalogue.Step, dw *Durable, dir string, spec *worker.WorkerSpec) (*Disk, error) {
	if dw != nil && dw.disk != nil {
		return dw.disk, nil
	}
	p, a, ok := diskFaultOf(st)
	if !ok {
		return nil, nil
	}
	dm, err := pc.diskErrors()
	if err != nil {
		return nil, fmt.Errorf("disk error %s: %w", a, err)
	}
	path := fmt.Sprintf("%s/disk-%d", dir, spec.Phase)
	if err := os.WriteFile(path, make([]byte, worker.DiskMarkSize), 0o644); err != nil {
		return nil, fmt.Errorf("disk errors: %w", err)
	}
	spec.DiskFile = path
	d := &Disk{worker: st.Worker, file: path, point: p, action: a, fs: dm, before: dm.DiskStats()}
	d.slow = slowHook(spec, p, a, &d.unreleased)
	pc.watch(d)
	return d, nil
}

// watch has the case's lazy mount arm d's error when it is asked for.
func (pc *Power) watch(d *Disk) {
	pc.diskMu.Lock()
	pc.disks = append(pc.disks, d)
	pc.diskMu.Unlock()
	d.fs.BeforeIO(pc.armDisks)
}

// slowHook is what a slow sync of a worker does before it returns: it
// moves the case's harness clock past the worker's lease (twice its TTL
// and 100 ms), or sleeps that long on the wall clock.
// A background worker's slow sync then holds until the worker is
// released (holdSlowSync): a competitor runs meanwhile.
func slowHook(spec *worker.WorkerSpec, p faults.Point, a faults.Action, unreleased *atomic.Bool) func() {
	stall := catalogue.Lease(time.Duration(spec.LeaseTTLMillis) * time.Millisecond).LongPause()
	clock := spec.ClockFile
	move := func() {
		c, err := worker.OpenClock(clock)
		if err != nil {
			time.Sleep(stall)
			return
		}
		defer c.Close()
		c.AdvanceTo(c.Now() + stall.Milliseconds())
	}
	if !spec.Background || spec.ReleaseFile == "" {
		return move
	}
	return func() {
		move()
		if !holdSlowSync(spec, p, a, stall) {
			unreleased.Store(true)
		}
	}
}

// watchDurableDisk arms the disk error of a durable-step case (its
// DurableKill names the kind): right before the catalogue.Step-th durable
// operation of the worker's Call-th store call, the worker goes on.
func watchDurableDisk(pc *Power, st catalogue.Step, spec *worker.WorkerSpec, d *Durable) error {
	dm, ok := pc.fs.(diskMount)
	if !ok {
		return fmt.Errorf("disk error %s: the case's lazy mount cannot fail (%T)", d.kill.Disk, pc.fs)
	}
	dd := &Disk{worker: st.Worker, point: faults.Point(catalogue.DurableStepName(d.kill)), action: faults.On(d.kill.Disk, 1),
		fs: dm, before: dm.DiskStats(), trigger: d.atStep}
	dd.slow = slowHook(spec, dd.point, dd.action, &dd.unreleased)
	d.disk = dd
	pc.watch(d.disk)
	return nil
}

// atStep reports whether the worker is in the store call the kill names,
// with catalogue.Step-1 of its durable operations done: the next is the step.
func (d *Durable) atStep() bool {
	pgid, call, _ := d.readMark()
	if pgid <= 1 || call != d.kill.Call {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	done := 0
	if n := len(d.seen); n > 0 && d.seen[n-1].Call == call {
		done = len(d.seen[n-1].Ops)
	}
	return done == d.kill.Step-1
}

// judgeDisk says what a durable-step disk error did: armed, or why not
// (AfterDisk says what it did once armed).
func (d *Durable) judgeDisk(worker string) (string, *verdict.NotExercisedReason) {
	k := d.kill
	if _, armed := d.disk.asked(); armed {
		return fmt.Sprintf("durable-step %s: armed for worker %s right before durable step %d of %d (%s) of its store call %d (%s)", k.Disk, worker, k.Step, k.Steps, k.Op, k.Call, k.Method), nil
	}
	note := fmt.Sprintf("durable-step %s for worker %s never armed: its store call %d (%s) never reached durable step %d", k.Disk, worker, k.Call, k.Method, k.Step)
	return note, &verdict.NotExercisedReason{Cause: verdict.CauseUnreachable, Detail: note,
		Advice: "the store took fewer file syncs, renames or unlinks in that call than in the probe run: run the matrix again"}
}

// EndDisks ends the disk errors of background workers that have ended
// (every worker of the case has).
func (f *Faults) EndDisks(ctx context.Context, pc *Power, c catalogue.Case, env worker.CaseEnv, space string, cx execmode.Case, ds []*Disk, res *verdict.CaseResult) error {
	for _, d := range ds {
		if _, err := f.AfterDisk(ctx, pc, c, env, space, cx, d, nil, res); err != nil {
			return err
		}
	}
	return nil
}

// AfterDisk ends a worker's disk error (the worker has ended): the mount
// is disarmed (space comes back), the case says what the error did, and
// after an fsync-error or a disk-full that fired the power is cut (a
// restart for I9), once the workers still paused are killed. An error
// that never acted (the worker made no write or fsync after the window)
// leaves the case not exercised. It returns the workers still paused.
func (f *Faults) AfterDisk(ctx context.Context, pc *Power, c catalogue.Case, env worker.CaseEnv, space string, cx execmode.Case, d *Disk, paused []execmode.Worker, res *verdict.CaseResult) ([]execmode.Worker, error) {
	if d == nil {
		return paused, nil
	}
	worker := d.worker
	pc.diskMu.Lock()
	pc.disks = slices.DeleteFunc(pc.disks, func(x *Disk) bool { return x == d })
	if len(pc.disks) == 0 {
		d.fs.BeforeIO(nil)
	}
	pc.diskMu.Unlock()
	d.fs.DisarmDisk()
	_, asked := d.asked()
	now := d.fs.DiskStats()
	did := cut.DiskStats{SyncErrors: now.SyncErrors - d.before.SyncErrors, NoSpace: now.NoSpace - d.before.NoSpace,
		Dropped: now.Dropped - d.before.Dropped, SlowSyncs: now.SlowSyncs - d.before.SlowSyncs}
	var fired bool
	var note string
	switch d.action.Kind {
	case faults.FsyncError:
		fired = did.SyncErrors > 0
		note = fmt.Sprintf("fsync-error at %s (worker %s): %d fsync failed with EIO, %d bytes it had to write dropped", d.point, worker, did.SyncErrors, did.Dropped)
	case faults.DiskFull:
		fired = did.NoSpace > 0
		note = fmt.Sprintf("disk-full at %s (worker %s): %d writes, creates or syncs failed with ENOSPC, %d un-synced bytes dropped; space back when the worker ended", d.point, worker, did.NoSpace, did.Dropped)
	case faults.SlowSync:
		fired = did.SlowSyncs > 0
		note = fmt.Sprintf("slow-sync at %s (worker %s): %d fsync took longer than the lease", d.point, worker, did.SlowSyncs)
	}
	if !fired {
		why := &verdict.NotExercisedReason{Cause: verdict.CauseUnreachable, Detail: "the worker never reached the window",
			Advice: "the worker's script does not lead to the window, or it stopped before: see the case's history"}
		if asked {
			why = &verdict.NotExercisedReason{Cause: verdict.CauseNoDiskIO, Detail: "the worker reached the window but made no file operation on the case's lazy mount that the error acts on afterwards",
				Advice: "after this window the store wrote or synced nothing on the case's lazy mount (its step is a read, or it keeps its files outside the directory it was given): the error cannot reach it there"}
		}
		why.Detail = fmt.Sprintf("%s at %s (worker %s) never acted: %s", d.action.Kind, d.point, worker, why.Detail)
		res.Notes = append(res.Notes, why.Detail)
		pc.diskMiss = cmp.Or(pc.diskMiss, why)
		return paused, nil
	}
	res.Notes = append(res.Notes, note)
	if d.action.Kind == faults.SlowSync {
		if d.unreleased.Load() {
			why := slowSyncUnreleased(d.point, worker)
			res.Notes = append(res.Notes, why.Detail)
			pc.diskMiss = cmp.Or(pc.diskMiss, why)
		}
		return paused, nil
	}
	for _, w := range paused {
		w.Kill()
		res.Workers = append(res.Workers, w.Wait())
	}
	h, err := cx.History()
	if err != nil {
		return nil, err
	}
	// The power goes once the worker has ended, not at the window.
	at := faults.Point(fmt.Sprintf("%s's end, after %s at %s", worker, d.action.Kind, d.point))
	hit := history.Record{Kind: history.Hit, Worker: worker, Point: at, Fault: &faults.Action{Kind: faults.PowerLoss}}
	if pc.server != nil {
		err = f.cutServerPower(ctx, pc, c, env, space, h, hit, res)
	} else {
		f.cutLazy(ctx, pc, c, env, space, h, hit, res)
	}
	pc.done++
	return nil, err
}

// diskErrors are the disk errors of the case: its lazy mount's, or the
// servers' data mounts' (pc.serverDisk).
func (pc *Power) diskErrors() (diskMount, error) {
	if pc == nil || pc.fs == nil && pc.serverDisk == nil {
		return nil, fmt.Errorf("the case's data is on no lazy mount")
	}
	if pc.serverDisk != nil {
		return pc.serverDisk, nil
	}
	dm, ok := pc.fs.(diskMount)
	if !ok {
		return nil, fmt.Errorf("the case's lazy mount cannot fail (%T)", pc.fs)
	}
	return dm, nil
}

// selectDisk adds the disk error columns the selection's kinds ask for
// (the runner's lazy mount works): the stores' own files must be on it,
// an embedded backend's or a store command's.
func (f *Faults) selectDisk(s *catalogue.Selection) error {
	s.Disk = nil
	for _, k := range s.Kinds {
		if !k.IsDisk() {
			continue
		}
		if !f.run.Backend.Embedded {
			if _, why := f.serverDisk(); why != "" {
				return untestedKind(k, why)
			}
		}
		s.Disk = append(s.Disk, k)
	}
	return nil
}

// untestedKind is the error of a kind asked for where it cannot run.
func untestedKind(k faults.Kind, why string) error {
	if k.IsDisk() {
		return fmt.Errorf("--kind %s: disk errors: not tested (%s)", k, why)
	}
	return fmt.Errorf("--kind %s: %s", k, PowerLossNotTested(why))
}

// onLazyMount reports whether kind k needs the case's lazy mount: a power
// loss or a disk error.
func onLazyMount(k faults.Kind) bool { return k.IsPowerLoss() || k.IsDisk() }
