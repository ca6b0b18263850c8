package catalogue

import (
	"fmt"
	"slices"

	"github.com/crashmatrix/crashmatrix/faults"
)

// The cases of the disk error kinds (faults.DiskKinds): what runs them is
// sim/casefaults/diskfaults.go.

// DiskMatrix is the column of disk error kind k: the error armed at every
// window of the catalogue and every store-declared window where a crash
// applies. It runs when asked for (--kind fsync-error, disk-full,
// slow-sync).
func (b Builder) DiskMatrix(ws []StoreWindow, k faults.Kind) []Case {
	var out []Case
	for _, s := range faults.Catalogue {
		if c, ok := b.DiskCase(s, k); ok {
			out = append(out, c)
		}
	}
	for _, w := range ws {
		if c, ok := b.DiskCase(w.Spec(), k); ok {
			c.Store = true
			out = append(out, c)
		}
	}
	return out
}

// DiskCase is the case of disk error k armed at spec's window: the
// window's case, with the worker going on past it on the faulted disk.
func (b Builder) DiskCase(spec faults.Spec, k faults.Kind) (Case, bool) {
	if !k.IsDisk() {
		return Case{}, false
	}
	c, ok := b.windowCase(spec, k)
	if !ok {
		return Case{}, false
	}
	what := map[faults.Kind]string{
		faults.FsyncError: "the next fsync of a store file fails with EIO and drops what it had to write (Linux); then the power is cut",
		faults.DiskFull:   "writes and syncs fail with ENOSPC until the worker ends; then the power is cut",
		faults.SlowSync:   "the next fsync of a store file lasts longer than the lease",
	}[k]
	c.Description = fmt.Sprintf("%s at %q (%s): %s; recovery must: %s", k, spec.Step, spec.Window, what, spec.Recovery)
	return c, true
}

// DurableDiskCases are the disk error kind k's cases at the durable
// steps the probe counted: for each shape of store call that took two
// durable steps or more (SweptCalls), each of its steps that is an fsync
// or fdatasync gets the error right before it.
func DurableDiskCases(calls []DurableCall, k faults.Kind) []Case {
	var out []Case
	for _, c := range SweptCalls(calls, 2) {
		n := len(c.Ops)
		for step := 1; step <= n; step++ {
			if op := c.Syscall(step); op == "fsync" || op == "fdatasync" {
				out = append(out, DurableDiskCase(DurableKill{Call: c.Call, Method: c.Method, Hit: c.Hit, Step: step, Steps: n, Op: op, Disk: k}))
			}
		}
	}
	return out
}

// DurableDiskCase is the standard script's fault worker meeting disk
// error k.Disk right before the k-th durable step of one store call,
// then the restart: "durable-step-ops.create-2-of-3-fsync-error".
func DurableDiskCase(k DurableKill) Case {
	name := fmt.Sprintf("%s-%s-%s", DurableStepClass, k.tag(), k.Disk)
	return Case{ID: name, System: MethodSystem(k.Method), Class: name, Kind: k.Disk,
		Description: fmt.Sprintf("%s, %s: the standard script's worker meets %s right before durable step %d of %d (%s) of its store call %d, found on the lazy mount, and goes on; recovery must finish what the store made durable",
			DurableStepName(k), k.Disk, k.Disk, k.Step, k.Steps, k.Op, k.Call),
		Steps: durableSteps(MethodSystem(k.Method), k)}
}

// durableDisk are the selection's disk error columns at durable steps,
// narrowed as the sweep is: none for a point, all of them for the class
// durable-step, one for its own class.
func (s Selection) durableDisk(calls []DurableCall) []Case {
	if len(s.Points) > 0 {
		return nil
	}
	var out []Case
	for _, k := range s.Disk {
		for _, c := range DurableDiskCases(calls, k) {
			if len(s.Classes) == 0 || slices.Contains(s.Classes, DurableStepClass) || slices.Contains(s.Classes, c.Class) {
				out = append(out, c)
			}
		}
	}
	return out
}
