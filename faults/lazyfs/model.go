// Package lazyfs is a lazy file system for power-loss faults: a FUSE file
// system (github.com/hanwen/go-fuse/v2) that keeps every write that was
// not synced in memory, so that PowerLoss can throw it away at a precise
// moment, after which the file system serves the synced state only. It is
// crashmatrix's own take on Jepsen's LazyFS.
//
// # The durability rule it models
//
// Each file and directory has a live state (what processes see) and a
// durable state (what survives a power loss):
//
//   - fsync(2) or fdatasync(2) of a regular file makes its data and size
//     durable (the two are not told apart: fdatasync must make the size
//     durable too when data needs it, and a database's fdatasync is there
//     to make appended data durable);
//   - a directory entry (a create, mkdir, unlink, rmdir, either side of a
//     rename, a hard link, a symbolic link with its target, a FIFO or a
//     socket) becomes durable only when the directory holding it is
//     fsynced; fsync of a file never makes its name durable, and fsync of
//     a directory never makes its files' data durable; a file's data is
//     the file's, whichever of its names it was synced through;
//   - a write through a handle opened O_SYNC or O_DSYNC is synced: the
//     kernel follows it with an fsync;
//   - rename without an fsync of the directories involved is not durable:
//     after a power loss the old name is back (with the file's durable
//     data) and the new name holds whatever it durably held before. This is
//     what POSIX promises and what ext4 (without its auto_da_alloc
//     heuristics), XFS and LazyFS give; an application that needs the
//     rename to survive must fsync the directory, as SQLite does for a new
//     journal or WAL file and PostgreSQL for its WAL segments;
//   - a file whose name is durable but whose data was never synced comes
//     back empty (or with the data of its last sync), like a file of ext4
//     after a crash before delayed allocation;
//   - attributes other than size (mode, owner, times) are kept as they
//     are live: the model loses data and names, not permission bits;
//   - close(2) syncs nothing; a clean Unmount syncs everything (an orderly
//     shutdown flushes the page cache).
//
// # Journaled names (Options.JournaledNames)
//
// ext4 (data=ordered) and XFS journal their metadata: an fsync of any file
// commits the journal, and with it every namespace change made before it
// (creates, unlinks, renames, in any directory). Programs that never fsync
// a directory survive power loss there. With JournaledNames the model
// gives that instead of the POSIX rule above: every fsync (of a file or a
// directory) makes every directory's entries durable, and the fsynced
// file's data; data stays per file. Neo4j needs it: after a crash it
// rebuilds index directories (removes them and creates new ones) and
// fsyncs the files, never their directory, so under the POSIX rule the
// next power loss brings the old, stale index files back.
//
// PowerLoss is atomic with respect to every file system operation: an
// operation either happened before it (and is lost unless synced) or after
// it. File handles opened before a power loss fail with EIO afterwards:
// the processes that held them are dead in the model.
//
// # Torn power loss (PowerLossTorn, Cut)
//
// A torn power loss keeps part of what was not synced, as a disk whose
// cache wrote some of its pages out before the power went: of each file
// that survives by the rule above, every 4 KiB page that differs between
// its live and durable data, and a changed size, is kept whole or lost
// whole. A hash of the seed, the file's path and the page decides, so one
// seed tears one state the same way every time. Names follow the rule as
// in a plain power loss; a file whose name is not durable is lost whole.
// With Tear.Unit SectorSize the unit is a 512-byte sector instead (a page
// the kernel was writing back when the power went, on a disk that writes
// 512 bytes at a time): of a page that differs, each sector whose bytes
// differ is kept or lost, so one write of a page can survive in part.
// A smaller unit, down to one byte, tears inside a sector (a disk that
// does not write a sector whole): each byte that differs may be old or
// new.
//
// # The kernel's caches
//
// The kernel keeps what it learnt of names (present or missing) and
// attributes for an hour and a file's pages across opens, so that a stat,
// a lookup or a read of a page it holds costs no round trip to the serving
// process. Nothing changes the model behind the kernel's back except a
// power loss, and PowerLoss drops, before it returns, every cached entry
// of a name the power loss changed or of a file (an entry carries the
// file's size, which an O_APPEND write trusts without asking) and the
// attributes and pages of every node the kernel knows
// (TestPowerLossLeavesNothingStaleInTheKernel). An
// operation that runs while PowerLoss runs, by a process the power loss
// should have killed, may still see the kernel's cache of before it; the
// harness kills every process of the store first.
//
// What the lazy file system costs without faults is the round trip to
// the serving process of every write(2) and fsync(2) (the kernel sends
// writes through, and must: a write it kept back would survive a power
// loss in its cache), a few tens of microseconds each on a loaded 2-core
// machine; see docs/power-loss.md for the figures.
package lazyfs

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs/cut"
)

// pageSize is the granularity at which file data is kept and shared
// between the live and the durable state (copy on write).
const pageSize = cut.PageSize

// content is the data of a regular file: pages (nil: a hole of zeros)
// and a size.
type content struct {
	pages [][]byte
	size  int64
}

func (c content) clone() content { return content{pages: slices.Clone(c.pages), size: c.size} }

// node is one file, directory, symbolic link or special file of the
// model.
type node struct {
	ino uint64
	dir bool
	// kind is the file type (syscall.S_IFLNK, S_IFIFO, S_IFSOCK) of a
	// node that is neither a directory nor a regular file; 0 for those
	// two. target is a symbolic link's.
	kind   uint32
	target string
	// nlink counts the live entries that name a node other than a
	// directory (hard links).
	nlink uint32
	mode  uint32 // permission bits
	uid   uint32
	gid   uint32
	mtime time.Time
	ctime time.Time
	// Regular files: the live and the durable data. They share pages
	// until one is written.
	live, dur content
	// failed, when hasFailed, is the live data as a failed sync left it
	// (diskerr.go): its pages not written since are clean in the page
	// cache but not durable, and no later sync writes them.
	failed    content
	hasFailed bool
	// Directories: the live and the durable entries.
	kids, durKids map[string]*node
	// dead marks a node a power loss removed.
	dead bool
}

// model is the state of one lazy file system; mu orders every operation
// and PowerLoss.
type model struct {
	mu      sync.Mutex
	root    *node
	nextIno uint64
	// gen counts power losses: handles opened in an earlier generation
	// are stale.
	gen uint64
	// syncs counts fsyncs, losses the data power losses threw away.
	syncs, losses int64
	// journaled: every fsync makes every name durable (JournaledNames).
	journaled bool
	// files counts the regular files the model ever held (made or
	// loaded).
	files int64
	// disk holds the disk errors armed and what they did (diskerr.go).
	disk diskState
	// off: the power is off (FS.PowerOff) until the next power loss.
	off bool
}

func newModel() *model {
	m := &model{nextIno: 2}
	m.root = &node{ino: 1, dir: true, mode: 0o755, kids: map[string]*node{}, durKids: map[string]*node{}, mtime: time.Now(), ctime: time.Now()}
	return m
}

// newNode makes a node that is durable nowhere yet.
func (m *model) newNode(dir bool, mode, uid, gid uint32) *node {
	n := &node{ino: m.nextIno, dir: dir, mode: mode & 0o7777, uid: uid, gid: gid, mtime: time.Now(), ctime: time.Now()}
	m.nextIno++
	if dir {
		n.kids, n.durKids = map[string]*node{}, map[string]*node{}
	} else {
		m.files++
	}
	return n
}

// newSpecial makes a symbolic link to target (kind syscall.S_IFLNK), a
// FIFO or a socket, durable nowhere yet. A symbolic link's target is
// written with it, as file systems store it in the inode: it is durable
// with the name.
func (m *model) newSpecial(kind uint32, target string, mode, uid, gid uint32) *node {
	n := &node{ino: m.nextIno, kind: kind, target: target, mode: mode & 0o7777, uid: uid, gid: gid, mtime: time.Now(), ctime: time.Now()}
	m.nextIno++
	return n
}

// regular reports whether n is a regular file.
func (n *node) regular() bool { return !n.dir && n.kind == 0 }

// typ is n's file type bits.
func (n *node) typ() uint32 {
	switch {
	case n.dir:
		return syscall.S_IFDIR
	case n.kind != 0:
		return n.kind
	}
	return syscall.S_IFREG
}

// read copies the live data at off into dest and returns how much.
func (n *node) read(dest []byte, off int64) int {
	if off >= n.live.size {
		return 0
	}
	end := min(off+int64(len(dest)), n.live.size)
	k := 0
	for p := off; p < end; {
		i, o := p/pageSize, p%pageSize
		chunk := min(int64(pageSize)-o, end-p)
		if i < int64(len(n.live.pages)) && n.live.pages[i] != nil {
			copy(dest[k:k+int(chunk)], n.live.pages[i][o:o+chunk])
		} else {
			clear(dest[k : k+int(chunk)])
		}
		k += int(chunk)
		p += chunk
	}
	return k
}

// ownPage returns live page i, copied first if the durable state shares it.
func (n *node) ownPage(i int64) []byte {
	for int64(len(n.live.pages)) <= i {
		n.live.pages = append(n.live.pages, nil)
	}
	pg := n.live.pages[i]
	switch {
	case pg == nil:
		pg = make([]byte, pageSize)
	case i < int64(len(n.dur.pages)) && n.dur.pages[i] != nil && &n.dur.pages[i][0] == &pg[0],
		n.hasFailed && i < int64(len(n.failed.pages)) && n.failed.pages[i] != nil && &n.failed.pages[i][0] == &pg[0]:
		pg = slices.Clone(pg)
	default:
		return pg
	}
	n.live.pages[i] = pg
	return pg
}

// write writes data at off into the live state.
func (n *node) write(data []byte, off int64) {
	end := off + int64(len(data))
	k := 0
	for p := off; p < end; {
		i, o := p/pageSize, p%pageSize
		chunk := min(int64(pageSize)-o, end-p)
		copy(n.ownPage(i)[o:o+chunk], data[k:k+int(chunk)])
		k += int(chunk)
		p += chunk
	}
	n.live.size = max(n.live.size, end)
	n.mtime = time.Now()
}

// truncate sets the live size; bytes past it read as zeros if it grows
// again.
func (n *node) truncate(size int64) {
	if size < n.live.size {
		last := (size + pageSize - 1) / pageSize
		if int64(len(n.live.pages)) > last {
			n.live.pages = n.live.pages[:last]
		}
		if o := size % pageSize; o != 0 && last-1 < int64(len(n.live.pages)) && n.live.pages[last-1] != nil {
			clear(n.ownPage(last - 1)[o:])
		}
	}
	n.live.size = size
	n.mtime = time.Now()
}

// sync makes the node's live state durable: a file's data, or a
// directory's entries.
func (m *model) sync(n *node) {
	m.syncs++
	if n.dir {
		n.durKids = make(map[string]*node, len(n.kids))
		for k, v := range n.kids {
			n.durKids[k] = v
		}
		return
	}
	n.dur = n.pending().clone()
	if n.hasFailed {
		// What the failed sync left clean stays clean: pages written
		// since are now synced (and shared with dur), the others stay
		// lost.
		n.failed = n.live.clone()
	}
}

// fsync is an fsync of n: with journaled names every directory's
// entries become durable too (a journal commit).
func (m *model) fsync(n *node) {
	if m.journaled {
		var walk func(d *node)
		walk = func(d *node) {
			m.sync(d)
			for _, k := range d.kids {
				if k.dir {
					walk(k)
				}
			}
		}
		walk(m.root)
	}
	m.sync(n)
}

// syncAll makes everything live durable (a clean shutdown).
func (m *model) syncAll() {
	var walk func(n *node)
	walk = func(n *node) {
		m.sync(n)
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(m.root)
}

// powerLoss throws away everything not synced: every node reachable
// through durable entries gets its durable state back, every other node
// reachable before is dead. It returns how many bytes and names were
// lost (for the statistics and the tests).
//
// With tear set, a file's un-synced data is torn instead of lost whole:
// each changed 4 KiB page (and the size) survives where tear decided so
// (tear.decide, called first, under the same lock).
//
// stale holds, for each directory that survives, the names whose
// entries in the kernel are stale: those the power loss changed (gone,
// back, or naming another node), and every name of a file, whose entry
// carries the attributes the kernel took with it. A size cached so
// outlives an invalidation of the inode's attributes where nothing asks
// for them again: a write opened O_APPEND goes to the end the kernel
// knows (TestPowerLossLeavesNothingStaleInTheKernel). A lookup afresh
// brings the size the power loss left. An unchanged directory's entry
// stays (a server's data directory is the root of a bind mount).
func (m *model) powerLoss(tear *tearing) (lostBytes int64, lostNames int, stale map[*node][]string, lost []LostFile) {
	m.gen++
	m.off = false
	stale = map[*node][]string{}
	kept := map[*node]bool{}
	var keep func(n *node, path string)
	keep = func(n *node, path string) {
		kept[n] = true
		now := time.Now()
		if n.dir {
			for name, k := range n.kids {
				if d := n.durKids[name]; d != k {
					lostNames++
					stale[n] = append(stale[n], name)
					what := LostCreated
					if d != nil {
						what = LostReplaced
					}
					lost = append(lost, LostFile{Path: strings.TrimPrefix(path+"/"+name, "/"), Name: what})
				} else if !k.dir {
					stale[n] = append(stale[n], name) // its cached size
				}
			}
			for name, k := range n.durKids {
				if n.kids[name] != k {
					lostNames++
					if _, live := n.kids[name]; !live {
						stale[n] = append(stale[n], name)
						lost = append(lost, LostFile{Path: strings.TrimPrefix(path+"/"+name, "/"), Name: LostRemoved})
					}
				}
			}
			n.kids = make(map[string]*node, len(n.durKids))
			for k, v := range n.durKids {
				n.kids[k] = v
			}
			for _, name := range slices.Sorted(maps.Keys(n.durKids)) {
				if k := n.durKids[name]; !kept[k] {
					keep(k, path+"/"+name)
				}
			}
		} else {
			if tear != nil {
				n.dur = torn(n.pending(), n.dur, tear.unit, func(unit int) bool { return tear.keep[tearKey{path, unit}] })
			}
			if b := changedBytes(n.live, n.dur); b > 0 {
				lostBytes += b
				lost = append(lost, LostFile{Path: strings.TrimPrefix(path, "/"), Bytes: b})
			}
			n.live = n.dur.clone()
			n.failed, n.hasFailed = content{}, false
		}
		// A new mtime makes the kernel drop pages it cached from the
		// lost state.
		n.mtime, n.ctime = now, now
	}
	var before []*node
	seen := map[*node]bool{}
	var collect func(n *node)
	collect = func(n *node) {
		if seen[n] { // a file with several names
			return
		}
		seen[n] = true
		before = append(before, n)
		for _, k := range n.kids {
			collect(k)
		}
	}
	collect(m.root)
	keep(m.root, "")
	// What survives is named by its durable entries only: count them.
	links := map[*node]uint32{}
	for n := range kept {
		for _, k := range n.durKids {
			links[k]++
		}
	}
	for n := range kept {
		if !n.dir {
			n.nlink = links[n]
		}
	}
	for _, n := range before {
		if !kept[n] {
			n.dead = true
			if !n.dir {
				lostBytes += n.live.size
			}
		}
	}
	m.losses += lostBytes
	sortLost(lost)
	return lostBytes, lostNames, stale, lost
}

// changedBytes counts the bytes of a that differ from b, page by page
// (a shared page counts as unchanged).
func changedBytes(a, b content) int64 {
	var n int64
	pages := max(len(a.pages), len(b.pages))
	for i := 0; i < pages; i++ {
		var pa, pb []byte
		if i < len(a.pages) {
			pa = a.pages[i]
		}
		if i < len(b.pages) {
			pb = b.pages[i]
		}
		if pa == nil && pb == nil || pa != nil && pb != nil && &pa[0] == &pb[0] {
			continue
		}
		n += pageSize
	}
	if a.size != b.size && n == 0 {
		n = max(a.size-b.size, b.size-a.size)
	}
	return n
}

// sortedNames returns a directory's live entry names in order.
func (n *node) sortedNames() []string {
	names := make([]string, 0, len(n.kids))
	for k := range n.kids {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// page returns page i of c, or nil.
func (c content) page(i int) []byte {
	if i < len(c.pages) {
		return c.pages[i]
	}
	return nil
}

func samePage(a, b []byte) bool {
	return a == nil && b == nil || a != nil && b != nil && &a[0] == &b[0]
}

// tearing is the plan of one torn power loss: which un-synced changes of
// the files that survive it are kept. Each is decided by a hash of the
// seed, the file's path and the page, so a seed decides the same tear on
// the same state whatever order the maps give.
type tearing struct {
	seed int64
	// unit is what is kept or lost whole: pageSize, a sector or less, down to a byte.
	unit int
	keep map[tearKey]bool
	// changes and kept count the un-synced changes and those kept.
	changes, kept int
}

// tearKey is one un-synced change: a unit (a 4 KiB page, a sector or less, by
// its index in the file) of the file at path (the first path a walk of
// the durable tree in name order reaches it by), or its size (-1).
type tearKey struct {
	path string
	unit int
}

// decide plans the tear on the model as it is (under m.mu): every page
// (or sector, by t.unit) that differs between a surviving file's live and
// durable data, and every changed size, is kept or dropped by the hash. A tear that would
// keep all of two or more changes, or none, flips the first: a torn power
// loss keeps something a plain one drops (so it tests something of its
// own) and drops something a clean shutdown keeps. A single change is
// kept.
func (t *tearing) decide(m *model) {
	t.keep = map[tearKey]bool{}
	var keys []tearKey
	seen := map[*node]bool{}
	var walk func(n *node, path string)
	walk = func(n *node, path string) {
		seen[n] = true
		if !n.dir {
			for _, unit := range unsynced(n.pending(), n.dur, t.unit) {
				keys = append(keys, tearKey{path, unit})
			}
			return
		}
		for _, name := range slices.Sorted(maps.Keys(n.durKids)) {
			if k := n.durKids[name]; !seen[k] {
				walk(k, path+"/"+name)
			}
		}
	}
	walk(m.root, "")
	for _, k := range keys {
		h := fnv.New64a()
		if t.unit == pageSize { // as before sectors came: a seed tears pages as it did
			fmt.Fprintf(h, "%d\x00%s\x00%d", t.seed, k.path, k.unit)
		} else {
			fmt.Fprintf(h, "%d\x00%s\x00%d\x00%d", t.seed, k.path, t.unit, k.unit)
		}
		t.keep[k] = mix(h.Sum64())&1 == 1
	}
	t.changes = len(keys)
	if len(keys) > 0 {
		all := true
		for _, k := range keys[1:] {
			all = all && t.keep[k] == t.keep[keys[0]]
		}
		switch {
		case len(keys) == 1:
			t.keep[keys[0]] = true
		case all:
			t.keep[keys[0]] = !t.keep[keys[0]]
		}
	}
	for _, k := range keys {
		if t.keep[k] {
			t.kept++
		}
	}
}

// mix is splitmix64's finalizer: FNV's low bits follow the last bytes
// hashed (the page number) too closely to decide by.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// unsynced lists what a file's live data changed from its durable data,
// the changes a torn power loss decides over, in units of unit bytes (a
// page, a sector of one, or less): the index of each unit whose bytes differ,
// then -1 when the size differs. A page the two states share is unchanged
// whole; so is one written again with the bytes it held, or zeros over a
// hole (a database extending a file does that): keeping or dropping it
// would change nothing, and a tear that only had such pages to decide
// over tore nothing.
func unsynced(live, dur content, unit int) []int {
	var out []int
	per := pageSize / unit
	for i := 0; i < max(len(live.pages), len(dur.pages)); i++ {
		lp, dp := live.page(i), dur.page(i)
		if samePage(lp, dp) {
			continue
		}
		for s := 0; s < per; s++ {
			if !bytes.Equal(sector(lp, s, unit), sector(dp, s, unit)) {
				out = append(out, i*per+s)
			}
		}
	}
	if live.size != dur.size {
		out = append(out, -1)
	}
	return out
}

// zeroSector is what a sector of a hole holds.
var zeroSector = make([]byte, pageSize)

// sector is the s-th unit-byte sector of page pg (zeros for a hole).
func sector(pg []byte, s, unit int) []byte {
	if pg == nil {
		return zeroSector[:unit]
	}
	return pg[s*unit : (s+1)*unit]
}

// torn returns dur with some of live's changes (unsynced, in units of
// unit bytes): each unit that differs and the size (-1), where keep says
// so.
func torn(live, dur content, unit int, keep func(unit int) bool) content {
	out := dur.clone()
	per := pageSize / unit
	mixed := map[int]bool{} // pages of out made of both states' sectors
	for _, u := range unsynced(live, dur, unit) {
		switch {
		case !keep(u):
		case u < 0:
			out.size = live.size
		default:
			i := u / per
			for len(out.pages) <= i {
				out.pages = append(out.pages, nil)
			}
			if unit == pageSize {
				out.pages[i] = live.page(i)
				continue
			}
			if !mixed[i] {
				pg := make([]byte, pageSize)
				copy(pg, out.pages[i]) // a hole stays zeros
				out.pages[i], mixed[i] = pg, true
			}
			s := u % per
			copy(out.pages[i][s*unit:], sector(live.page(i), s, unit))
		}
	}
	return trimmed(out)
}

// trimmed drops what c holds past its size (it would reappear if the
// file grew): whole pages, and the tail of the last one (copied first).
func trimmed(out content) content {
	last := int((out.size + pageSize - 1) / pageSize)
	if len(out.pages) > last {
		out.pages = out.pages[:last]
	}
	if o := out.size % pageSize; o != 0 && last > 0 && last <= len(out.pages) && out.pages[last-1] != nil {
		pg := slices.Clone(out.pages[last-1])
		clear(pg[o:])
		out.pages[last-1] = pg
	}
	return out
}
