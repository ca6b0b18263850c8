package lazyfs

import (
	"syscall"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs/cut"
	"github.com/hanwen/go-fuse/v2/fs"
)

// Disk errors: faults a disk gives a live system, armed and disarmed by
// the harness (the fsync-error, disk-full and slow-sync fault kinds).
//
//   - FailNextSync: the next fsync or fdatasync of a regular file returns
//     EIO, once, and the file's un-synced data is dropped as Linux drops
//     it after a failed writeback: its pages stay in the page cache,
//     marked clean, so the processes still read them, but no later sync
//     writes them; a later fsync succeeds and the data is not durable. A
//     power loss (PowerLoss, Cut) loses it, and so does a drop of the
//     page cache (DropCaches), after which a read returns the synced
//     data. A page written again after the error is dirty again, and is
//     written back whole, with what the cache held of it (as the kernel
//     writes back a page). This is what PostgreSQL's fsync retry met in
//     2018 ("fsyncgate").
//   - SetFull(true): from that instant every write, every new name
//     (create, mkdir, mknod, symlink, link) and every fallocate fails
//     with ENOSPC, and so does the fsync of a file that holds un-synced
//     data, which is dropped as after an EIO (a writeback that found no
//     room failed); statfs reports no free blocks. SetFull(false) gives
//     the space back. Renames, unlinks, truncations, reads and the fsync
//     of a file with nothing to write go on.
//   - SlowNextSync(fn): the next fsync or fdatasync of a regular file
//     does what it does, then calls fn before it returns to its caller:
//     the harness makes it last as long as it wants (past a lease), by
//     moving its own clock or by sleeping.
//
// BeforeIO lets the harness arm them at the instant a process asks,
// through a channel of its own: it is called before every operation
// that a disk error acts on.

// DiskStats is what the armed disk errors did (cut.DiskStats: a
// harness names it without linking FUSE).
type DiskStats = cut.DiskStats

// DiskErrors are the disk errors of a mount (cut.DiskErrors), as a
// harness that holds several mounts names them.
type DiskErrors = cut.DiskErrors

var _ DiskErrors = (*FS)(nil)

// diskState is the model's armed disk errors (under the model's lock).
type diskState struct {
	syncErr bool
	// syncOf, when set, narrows syncErr to the files whose path below
	// the mount it accepts (FailNextSyncOf).
	syncOf func(path string) bool
	full   bool
	slow   func(DurableOp)
	stats  DiskStats
}

// FailNextSync arms an EIO for the next fsync or fdatasync of a regular
// file of the mount; the file's un-synced data is dropped then.
func (f *FS) FailNextSync() {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.m.disk.syncErr, f.m.disk.syncOf = true, nil
}

// FailNextSyncOf is FailNextSync for the next fsync or fdatasync of a
// regular file whose path below the mount match accepts; the syncs of
// other files go on.
func (f *FS) FailNextSyncOf(match func(path string) bool) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.m.disk.syncErr, f.m.disk.syncOf = true, match
}

// SetFull makes the disk full (writes and syncs of un-synced data fail
// with ENOSPC) or gives the space back.
func (f *FS) SetFull(full bool) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.m.disk.full = full
}

// SlowNextSync has fn called by the next fsync or fdatasync of a regular
// file, once it has made the file durable and before its caller learns
// so; nil disarms it.
func (f *FS) SlowNextSync(fn func(DurableOp)) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.m.disk.slow = fn
}

// DisarmDisk disarms every disk error: an EIO or a slow sync that has
// not fired, and a full disk.
func (f *FS) DisarmDisk() {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.m.disk.syncErr, f.m.disk.syncOf, f.m.disk.full, f.m.disk.slow = false, nil, false, nil
}

// DiskStats says what the disk errors did so far.
func (f *FS) DiskStats() DiskStats {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	return f.m.disk.stats
}

// BeforeIO has fn called, outside every lock, before each write, sync,
// create, link and fallocate reaches the model: the harness arms there
// the disk errors a process asked for at that instant. nil stops it.
func (f *FS) BeforeIO(fn func()) {
	if fn == nil {
		f.beforeIO.Store(nil)
		return
	}
	f.beforeIO.Store(&fn)
}

// arming runs the BeforeIO hook.
func (f *FS) arming() {
	if fn := f.beforeIO.Load(); fn != nil {
		(*fn)()
	}
}

// DropCaches drops the page cache, as "echo 1 > /proc/sys/vm/drop_caches"
// does: what a failed sync left clean and not durable is gone, and the
// files read as they were synced (with what was written since the error
// and is not synced yet). Without a failed sync it changes nothing.
func (f *FS) DropCaches() {
	f.m.mu.Lock()
	stale := map[*node][]string{}
	seen := map[*node]bool{}
	var walk func(d *node)
	walk = func(d *node) {
		for name, k := range d.kids {
			switch {
			case k.dir:
				if !seen[k] {
					seen[k] = true
					walk(k)
				}
			case k.hasFailed:
				stale[d] = append(stale[d], name)
				if !seen[k] {
					seen[k] = true
					k.live = k.pending().clone()
					k.failed, k.hasFailed = content{}, false
				}
			}
		}
	}
	walk(f.m.root)
	var open []*fs.Inode
	for h := range f.open {
		open = append(open, h.in)
	}
	f.m.mu.Unlock()
	f.invalidate(stale, open)
}

// pending is what a sync of n writes: its live data, except the pages a
// failed sync left clean (not written since), which stay as they are
// durably; the size stays as it is durably too, unless the file was
// written or resized since (a page written back carries the size with
// it, as ext4's i_disksize follows its writeback).
func (n *node) pending() content {
	if !n.hasFailed {
		return n.live
	}
	out := content{size: n.live.size, pages: make([][]byte, len(n.live.pages))}
	rewritten := false
	for i, pg := range n.live.pages {
		switch {
		case pg != nil && samePage(pg, n.failed.page(i)):
			pg = n.dur.page(i)
		case !samePage(pg, n.dur.page(i)):
			rewritten = true
		}
		out.pages[i] = pg
	}
	if n.live.size == n.failed.size && !rewritten {
		out.size = n.dur.size
	}
	return trimmed(out)
}

// dirty reports whether a sync of n has anything to write.
func (n *node) dirty() bool {
	return len(unsynced(n.pending(), n.dur, pageSize)) > 0
}

// drop is a failed writeback of n: what it had to write is clean and not
// durable. It returns how many bytes that was.
func (n *node) drop() int64 {
	b := changedBytes(n.pending(), n.dur)
	n.failed, n.hasFailed = n.live.clone(), true
	return b
}

// syncFault is the error an armed disk error gives the fsync of n, a
// regular file at path (0: none), with the drop it makes.
func (m *model) syncFault(n *node, path func() string) syscall.Errno {
	d := &m.disk
	switch {
	case d.syncErr && (d.syncOf == nil || d.syncOf(path())):
		d.syncErr, d.syncOf = false, nil
		d.stats.SyncErrors++
		d.stats.Dropped += n.drop()
		return syscall.EIO
	case d.full && n.dirty():
		d.stats.NoSpace++
		d.stats.Dropped += n.drop()
		return syscall.ENOSPC
	}
	return 0
}

// noSpace reports whether the disk is full, counting the operation it
// fails.
func (m *model) noSpace() bool {
	if m.disk.full {
		m.disk.stats.NoSpace++
	}
	return m.disk.full
}

// takeSlow returns the armed slow-sync hook, once.
func (m *model) takeSlow() func(DurableOp) {
	fn := m.disk.slow
	if fn != nil {
		m.disk.slow = nil
		m.disk.stats.SlowSyncs++
	}
	return fn
}
