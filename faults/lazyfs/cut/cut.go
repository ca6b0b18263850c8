// Package cut names what a power loss of a lazy file system
// (faults/lazyfs) threw away and how it tears, without FUSE: the types a
// worker process and a report name, while only the supervisor mounts.
package cut

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Loss says what one power loss threw away.
type Loss struct {
	// Bytes is the file data that was written and not synced (counted
	// in 4 KiB pages; a page torn inside counts whole), Names the
	// directory entries created, removed or
	// renamed without a directory fsync.
	Bytes int64
	Names int
	// Torn is set for a torn power loss (lazyfs.FS.PowerLossTorn): Changes are the
	// un-synced changes it decided over (a page, or a sector with
	// Tear.Unit SectorSize, of a surviving file, or its size), Kept those
	// it kept; Unit is the tear's unit. Bytes counts what was dropped.
	Torn          bool
	Changes, Kept int
	Unit          int
	// Files says where: each file whose data, and each name whose
	// change, was thrown away (names first, then the largest losses).
	Files []LostFile
}

// LostFile is one thing a power loss threw away: a file's data written
// and not synced (Bytes), or a name created, removed or renamed over
// without its directory synced (Name).
type LostFile struct {
	// Path is below the mount ("pystore.db-journal", "base/5/16384").
	Path  string
	Bytes int64
	Name  LostName
}

// LostName is what happened to a name a power loss undid.
type LostName string

const (
	// LostCreated: the name was made and its directory not synced; it
	// is gone.
	LostCreated LostName = "created"
	// LostRemoved: the name was removed (or renamed away) and its
	// directory not synced; it is back, on its old file.
	LostRemoved LostName = "removed"
	// LostReplaced: another file was renamed over the name and its
	// directory not synced; the old file is back under it.
	LostReplaced LostName = "replaced"
)

// String says what was lost, for a person: "pystore.db-journal: removed,
// its directory not synced, so it is back".
func (f LostFile) String() string {
	switch f.Name {
	case LostCreated:
		return f.Path + ": created, its directory not synced, so it is gone"
	case LostRemoved:
		return f.Path + ": removed, its directory not synced, so it is back"
	case LostReplaced:
		return f.Path + ": renamed over, its directory not synced, so the old file is back"
	}
	return fmt.Sprintf("%s: %d bytes written and not synced", f.Path, f.Bytes)
}

// SortLost orders what a power loss threw away for reading: names first,
// then files by the data they lost, the most first, then by path.
func SortLost(fs []LostFile) {
	slices.SortFunc(fs, func(a, b LostFile) int {
		switch {
		case (a.Name != "") != (b.Name != ""):
			if a.Name != "" {
				return -1
			}
			return 1
		case a.Bytes != b.Bytes:
			return cmp.Compare(b.Bytes, a.Bytes)
		}
		return strings.Compare(a.Path, b.Path)
	})
}

// Add sums o into l: the loss of several mounts cut together (a torn
// loss if either was).
func (l *Loss) Add(o Loss) {
	l.Bytes += o.Bytes
	l.Names += o.Names
	l.Files = append(l.Files, o.Files...)
	SortLost(l.Files)
	l.Torn = l.Torn || o.Torn
	l.Changes += o.Changes
	l.Kept += o.Kept
	l.Unit = max(l.Unit, o.Unit)
}

// The units a torn power loss keeps or loses whole (Tear.Unit): a page of
// the page cache, which the kernel writes back whole, and a disk sector,
// which a disk writes whole (a page is eight of them on a 512-byte-sector
// disk, and the power may go between two). Any smaller power of two, down
// to a byte, tears inside one sector: a disk that does not write a sector
// whole.
const (
	PageSize   = 4096
	SectorSize = 512
)

// Tear is how a power loss tears (lazyfs.FS.Cut): Unit 0 is a plain power loss,
// which loses everything not synced; PageSize, SectorSize or a smaller
// power of two keeps or loses each such unit of un-synced data whole, as
// Seed decides.
type Tear struct {
	Unit int
	Seed int64
}

// DurableOp is one file operation that makes a store's state durable,
// or atomically visible, at the moment it returns: an fsync or fdatasync
// of a file or directory, a rename, a link or an unlink. Pid is the task
// that made it (the kernel's caller of the FUSE request: a thread's id,
// whose /proc/PID/stat names its process group), Path the file below
// the mount.
type DurableOp struct {
	Pid  uint32
	Op   string
	Path string
}

// String is the operation as a person reads it: "fsync pystore.db-wal".
func (d DurableOp) String() string { return d.Op + " " + d.Path }

// DiskStats is what the disk errors armed on a lazy mount did
// (lazyfs.FS.DiskStats).
type DiskStats struct {
	// SyncErrors counts the fsyncs that returned EIO (FailNextSync).
	SyncErrors int
	// NoSpace counts the operations that returned ENOSPC (SetFull).
	NoSpace int
	// Dropped is how many bytes of un-synced data (4 KiB pages, or the
	// size change) failed syncs dropped.
	Dropped int64
	// SlowSyncs counts the syncs that called a SlowNextSync hook.
	SlowSyncs int
}

// DiskErrors are the disk errors a harness arms on a lazy mount
// (*lazyfs.FS implements it; lazyfs.FS.FailNextSync says what each does):
// named here so that a harness that links no FUSE can name a mount's.
type DiskErrors interface {
	FailNextSync()
	SetFull(bool)
	SlowNextSync(func(DurableOp))
	DisarmDisk()
	BeforeIO(func())
	DiskStats() DiskStats
}
