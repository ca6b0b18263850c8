package worker

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

// The mark files a worker maps to tell the supervisor what it is doing
// while the supervisor serves the case's lazy mount: which store call it is
// in (durable steps, sim/casefaults/durable.go) and which disk error a window asks
// for (sim/casefaults/diskfaults.go).

// storeMethods are the store protocol's method names; a callMark holds
// one by its index (from 1).
var storeMethods = []string{
	"ops.create", "ops.get", "ops.getPlan", "ops.cas", "ops.listRecoverable", "ops.list", "ops.claim", "ops.releaseClaim",
	"states.findCurrent", "states.findByOperationId", "states.cas", "states.remove", "states.recordVersion", "states.versions",
	"states.list", "states.isReferenced", "registry.findMatches", "registry.saveAll", "registry.list", "graph.apply",
	"graph.readRecords", "locks.tryAcquire", "locks.renew", "locks.release",
	// System B's stores (markedPlanSave).
	"checkpoints.load", "checkpoints.put", "plans.save", "plans.list",
}

// CallMarkSize is the mark file: the worker's process group, then its
// current call (number << 8 | method index; 0 between calls).
const CallMarkSize = 16

// callMark is a worker's side of the mark file.
type callMark struct {
	mem   []byte
	call  *int64
	calls atomic.Int64
}

// openCallMark maps the mark file the supervisor made and writes the
// worker's process group into it.
func openCallMark(path string) (*callMark, error) {
	mem, err := mapMark(path, CallMarkSize, "durable steps")
	if err != nil {
		return nil, err
	}
	atomic.StoreInt64((*int64)(unsafe.Pointer(&mem[0])), int64(syscall.Getpgrp()))
	return &callMark{mem: mem, call: (*int64)(unsafe.Pointer(&mem[8]))}, nil
}

// mapMark maps the first size bytes of the mark file at path, shared
// with the supervisor that reads it; what names the mark in errors.
func mapMark(path string, size int, what string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s %s: mmap: %w", what, path, err)
	}
	return mem, nil
}

// enter marks the next store call, of method, as the worker's current one
// until the returned function runs.
func (m *callMark) enter(method string) func() {
	v := m.calls.Add(1)<<8 | int64(slices.Index(storeMethods, method)+1)
	atomic.StoreInt64(m.call, v)
	return func() { atomic.CompareAndSwapInt64(m.call, v, 0) }
}

func (m *callMark) close() {
	if m != nil {
		_ = syscall.Munmap(m.mem)
	}
}

// DiskMarkSize is the mark file: the disk kind the worker asks for, by
// its index in faults.DiskKinds (from 1; 0: none yet).
const DiskMarkSize = 8

// diskHook is a worker's faults.Runtime.Disk: it maps the mark file
// and writes the kind into it at the hit.
func diskHook(path string) (func(context.Context, faults.Hit) error, func(), error) {
	mem, err := mapMark(path, DiskMarkSize, "disk errors")
	if err != nil {
		return nil, nil, err
	}
	mark := (*int64)(unsafe.Pointer(&mem[0]))
	hook := func(_ context.Context, h faults.Hit) error {
		i := slices.Index(faults.DiskKinds, h.Action.Kind)
		if i < 0 {
			return fmt.Errorf("%s is no disk error", h.Action.Kind)
		}
		atomic.StoreInt64(mark, int64(i+1))
		return nil
	}
	return hook, func() { _ = syscall.Munmap(mem) }, nil
}

// StoreMethods are the store calls a call mark can name (and a
// durable-step kill with it).
func StoreMethods() []string { return slices.Clone(storeMethods) }

// markedPlanSave wraps System B's stores so that each of their calls is
// marked as the worker's current store call (the durable-step sweep of
// System B: sim/casefaults/durable.go); without a mark it returns ps. A
// store ps lacks stays nil.
func markedPlanSave(ps PlanSaveStores, m *callMark) PlanSaveStores {
	if m == nil {
		return ps
	}
	if ps.Checkpoints != nil {
		ps.Checkpoints = markedCheckpoints{ps.Checkpoints, m}
	}
	if ps.Plans != nil {
		ps.Plans = markedPlans{ps.Plans, m}
	}
	return ps
}

type markedCheckpoints struct {
	inner plansave.CheckpointStore
	m     *callMark
}

func (c markedCheckpoints) Load(ctx context.Context, thread string) (plansave.Checkpoint, bool, error) {
	defer c.m.enter("checkpoints.load")()
	return c.inner.Load(ctx, thread)
}

func (c markedCheckpoints) Put(ctx context.Context, cp plansave.Checkpoint) error {
	defer c.m.enter("checkpoints.put")()
	return c.inner.Put(ctx, cp)
}

type markedPlans struct {
	inner plansave.PlanStore
	m     *callMark
}

func (p markedPlans) Save(ctx context.Context, owner, key, question string, minutes int) (int64, error) {
	defer p.m.enter("plans.save")()
	return p.inner.Save(ctx, owner, key, question, minutes)
}

func (p markedPlans) List(ctx context.Context, owner string) ([]plansave.PlanRow, error) {
	defer p.m.enter("plans.list")()
	return p.inner.List(ctx, owner)
}
