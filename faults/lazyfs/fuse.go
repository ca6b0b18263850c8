package lazyfs

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs/cut"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FSType is the type of every lazy mount in /proc/mounts ("fuse." and the
// name go-fuse gives the kernel): Stale finds our mounts by it.
const FSType = "fuse.crashmatrix-lazyfs"

// sourcePrefix starts the source field of a lazy mount; the pid of the
// process serving it follows.
const sourcePrefix = "lazyfs:"

// Options configure a mount.
type Options struct {
	// Backing, when set, is the disk: the mount starts with its contents
	// as the durable state, and a clean Unmount (or one after a power
	// loss) writes the durable state back into it, so that the case's
	// data stays there for a person to look at.
	Backing string
	// AllowOther lets other users (a database server's own user in a
	// container) use the mount.
	AllowOther bool
	// JournaledNames models a file system that journals its metadata
	// (ext4, XFS): any fsync makes every earlier create, unlink and
	// rename durable, not only a directory's own fsync (see the package
	// doc).
	JournaledNames bool
}

// FS is one mounted lazy file system.
type FS struct {
	m          *model
	server     *fuse.Server
	root       *lnode
	mountpoint string
	backing    string
	done       bool
	// open holds the handles open now (under m.mu): a power loss drops
	// the kernel's cached pages of their files too, whether or not a
	// name still leads to them.
	open map[*handle]struct{}
	// durable is told of every durable operation (OnDurable).
	durable atomic.Pointer[func(DurableOp)]
	// beforeIO arms disk errors (BeforeIO, diskerr.go).
	beforeIO atomic.Pointer[func()]
}

// DurableOp is one durable file operation (cut.DurableOp: a worker
// names it without linking FUSE).
type DurableOp = cut.DurableOp

// OnDurable has fn told of every durable operation (DurableOp), once it
// is done and before its caller learns so: fn runs in the goroutine that
// serves the request, so a process that fn kills never sees the call
// return. nil stops it. A write through a handle opened O_SYNC or O_DSYNC
// reaches the mount as a write and then an fsync (fdatasync) of the file,
// and is reported as that sync.
func (f *FS) OnDurable(fn func(DurableOp)) {
	if fn == nil {
		f.durable.Store(nil)
		return
	}
	f.durable.Store(&fn)
}

// tell reports a durable operation of ctx's caller on l (OnDurable).
func (l *lnode) tell(ctx context.Context, op, name string) {
	fn := l.f.durable.Load()
	if fn == nil {
		return
	}
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return
	}
	p := l.Path(nil)
	if name != "" {
		p = strings.TrimPrefix(p+"/"+name, "/")
	}
	(*fn)(DurableOp{Pid: c.Pid, Op: op, Path: p})
}

// cacheTimeout is how long the kernel may keep what it learnt of a name
// (that it exists, or that it does not) and of a node's attributes
// without asking again. Every change reaches the model through the
// kernel, which updates its caches itself, except a power loss, which
// drops every cached entry, attribute and page that it made stale
// (invalidate); so the kernel may keep them long, and stat, lookups and
// the reads of pages it holds cost no round trip to this process.
const cacheTimeout = time.Hour

// What a power loss threw away, and how it tears: package cut (without
// FUSE, so that a worker process can name them without linking go-fuse).
type (
	Loss     = cut.Loss
	LostFile = cut.LostFile
	LostName = cut.LostName
	Tear     = cut.Tear
)

const (
	LostCreated  = cut.LostCreated
	LostRemoved  = cut.LostRemoved
	LostReplaced = cut.LostReplaced
	PageSize     = cut.PageSize
	SectorSize   = cut.SectorSize
)

// sortLost orders what a power loss threw away for reading (cut.SortLost).
func sortLost(fs []LostFile) { cut.SortLost(fs) }

// Mount mounts a lazy file system on mountpoint (an existing directory).
// The file system is served by goroutines of this process: let other
// processes use it. This process must not map (mmap) files of the mount
// (SQLite does, for its WAL index): a page fault on its own mount while
// the Go runtime stops the world for the collector waits for ever.
func Mount(mountpoint string, opt Options) (*FS, error) {
	f := &FS{m: newModel(), mountpoint: mountpoint, backing: opt.Backing, open: map[*handle]struct{}{}}
	f.m.journaled = opt.JournaledNames
	if opt.Backing != "" {
		if err := load(f.m, opt.Backing); err != nil {
			return nil, fmt.Errorf("lazyfs: load %s: %w", opt.Backing, err)
		}
	}
	timeout := cacheTimeout
	fo := &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:            fmt.Sprintf("%s%d", sourcePrefix, os.Getpid()),
			Name:              "crashmatrix-lazyfs",
			DirectMountStrict: true,
			AllowOther:        opt.AllowOther,
			DisableXAttrs:     true,
		},
		// The kernel caches entries, attributes and pages; a power
		// loss drops what it made stale (cacheTimeout).
		EntryTimeout: &timeout, AttrTimeout: &timeout, NegativeTimeout: &timeout,
		RootStableAttr: &fs.StableAttr{Ino: 1, Mode: fuse.S_IFDIR},
	}
	f.root = &lnode{f: f, n: f.m.root}
	srv, err := fuse.NewServer(fs.NewNodeFS(f.root, fo), mountpoint, &fo.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("lazyfs: mount %s: %w", mountpoint, err)
	}
	go srv.Serve()
	// WaitMount runs go-fuse's poll hack: it polls a file of the new
	// mount once (raw open and poll(2), no Go netpoller), so the kernel
	// learns that this file system does not poll. Without it, the first
	// file this process opens on its own mount registers with the Go
	// netpoller, whose epoll_ctl sends the kernel's poll request to this
	// very process and can deadlock it (seen: a test process stuck in D
	// state in fuse_file_poll). A process SIGKILLed inside that one poll
	// leaves a mount whose server is dying; CleanStale aborts it.
	if err := srv.WaitMount(); err != nil {
		_ = srv.Unmount()
		return nil, fmt.Errorf("lazyfs: mount %s: %w", mountpoint, err)
	}
	f.server = srv
	return f, nil
}

// Dir is the mount point.
func (f *FS) Dir() string { return f.mountpoint }

// PowerLoss throws away, at once, every write, truncation and directory
// change that was not synced; from then on the file system serves the
// synced state, and handles opened before fail with EIO.
//
// The model changes at one instant, atomically with respect to every
// operation that reaches it; the kernel's cached entries, attributes and
// pages that the change made stale are dropped right after, before
// PowerLoss returns (they cannot be dropped while the model is locked: the
// kernel may wait for an operation in flight in the same directory, which
// waits for the lock). So every operation from the moment PowerLoss
// returns sees the synced state; one that runs during the call, by a
// process the power loss should have killed, may still be served from
// the kernel's cache. The harness kills every process of the store first.
func (f *FS) PowerLoss() Loss {
	return f.cut(nil)
}

// PowerOff is the instant the power goes, ahead of the power loss (Cut)
// that the harness makes once every process of the store is dead: from
// it on, every operation that would change the file system (a write, a
// sync, a truncation, a fallocate, a change of attributes, a name made,
// changed or removed) fails with EIO and changes nothing, so that nothing
// a process writes or syncs after that instant, while the harness kills
// it, survives; reads go on. The next power loss (PowerLoss, Cut) brings
// the power back. An fsync reported to OnDurable is done already: fn may
// turn the power off right after it, and the sync stays.
func (f *FS) PowerOff() {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.m.off = true
}

// PowerLossTorn is PowerLoss with torn writes: of the files that survive,
// each 4 KiB page written and not synced is kept whole or lost whole, and
// so is a changed size; names follow the rule as always. The seed decides
// which, by a hash of the seed, the file's path and the page: the same
// seed on the same state tears the same way. Unless nothing was left
// un-synced, something is kept (what a plain power loss drops) and, of
// two changes or more, something is lost (Loss.Changes, Loss.Kept).
// This is LazyFS's torn-write fault at the granularity of the page cache;
// Cut with Tear{Unit: SectorSize} tears inside pages.
func (f *FS) PowerLossTorn(seed int64) Loss {
	return f.Cut(Tear{Unit: PageSize, Seed: seed})
}

// Cut is a power loss torn as t says: PowerLoss for the zero Tear,
// PowerLossTorn for Unit PageSize, and for a smaller Unit (a power of two:
// SectorSize, or down to a byte) the same at that unit: of each un-synced
// page, each unit whose bytes differ from its synced content is kept or
// lost whole.
func (f *FS) Cut(t Tear) Loss {
	switch {
	case t.Unit == 0:
		return f.cut(nil)
	case t.Unit >= 1 && t.Unit <= PageSize && t.Unit&(t.Unit-1) == 0:
		return f.cut(&tearing{seed: t.Seed, unit: t.Unit})
	}
	panic(fmt.Sprintf("lazyfs: a tear of %d bytes (want a power of two from 1 to %d)", t.Unit, PageSize))
}

// cut is a power loss, torn when tear is set: the model first, then the
// kernel's caches.
func (f *FS) cut(tear *tearing) Loss {
	f.m.mu.Lock()
	if tear != nil {
		tear.decide(f.m)
	}
	b, n, stale, lost := f.m.powerLoss(tear)
	var open []*fs.Inode
	for h := range f.open {
		open = append(open, h.in)
	}
	f.m.mu.Unlock()
	f.invalidate(stale, open)
	loss := Loss{Bytes: b, Names: n, Files: lost}
	if tear != nil {
		loss.Torn, loss.Changes, loss.Kept, loss.Unit = true, tear.changes, tear.kept, tear.unit
	}
	return loss
}

// invalidate drops what the kernel cached and a power loss made stale:
// the entries of every name the power loss changed and of every file
// (the kernel looks each up again, and takes the attributes that come
// with the answer, the size included; a directory's entry takes what it
// cached below it along), and the
// attributes and pages of every node it knows, by a name (the inodes of
// go-fuse's tree, which mirrors the kernel's) or by an open handle. What
// it does not know it cannot have cached. Errors are ignored: ENOENT is a
// node the kernel forgot meanwhile, and the mount may be gone.
func (f *FS) invalidate(stale map[*node][]string, open []*fs.Inode) {
	if f.server == nil {
		return
	}
	seen := map[*fs.Inode]bool{}
	var walk func(in *fs.Inode)
	walk = func(in *fs.Inode) {
		if in == nil || seen[in] {
			return
		}
		seen[in] = true
		if ln, ok := in.Operations().(*lnode); ok {
			for _, name := range stale[ln.n] {
				_ = in.NotifyEntry(name)
			}
		}
		_ = in.NotifyContent(0, 0)
		for _, c := range in.Children() {
			walk(c)
		}
	}
	walk(f.root.EmbeddedInode())
	for _, in := range open {
		if !seen[in] {
			seen[in] = true
			_ = in.NotifyContent(0, 0)
		}
	}
}

// CopyDurable writes the durable state (what a power loss now would
// leave) into dir, in place of what dir held: a copy to read without
// going through the mount.
func (f *FS) CopyDurable(dir string) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	return store(f.m, dir)
}

// SyncAll makes everything live durable, as sync(2) or the kernel's
// writeback of old dirty pages would: what was written before it survives
// the next power loss. A run calls it once a server on the mount is set
// up, so that the power loss drops what the run wrote, not the setup.
func (f *FS) SyncAll() {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	f.m.syncAll()
}

// FilesMade is how many regular files the file system ever held (made
// on it, or loaded from its backing directory): none means that whoever
// was to use it kept its data somewhere else.
func (f *FS) FilesMade() int64 {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	return f.m.files
}

// Syncs is how many fsyncs the file system has seen.
func (f *FS) Syncs() int64 {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	return f.m.syncs
}

// Unmount unmounts the file system; a mount still busy is detached
// (it goes once its last user does). With a backing directory, the state
// is written back to it: everything live, as an orderly shutdown syncs
// (after a power loss, what survived it and what was written since).
func (f *FS) Unmount() error {
	if f.done {
		return nil
	}
	f.done = true
	// go-fuse retries a busy unmount a few times itself.
	if err := f.server.Unmount(); err != nil {
		// Still busy: detach it from the tree now; the kernel ends the
		// connection once its last user closes, and the server's loop
		// with it (waiting for that here could wait for ever).
		if derr := syscall.Unmount(f.mountpoint, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("lazyfs: unmount %s: %v; detach: %w", f.mountpoint, err, derr)
		}
	} else {
		f.server.Wait()
	}
	if f.backing != "" {
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		f.m.syncAll()
		if err := store(f.m, f.backing); err != nil {
			return fmt.Errorf("lazyfs: write %s: %w", f.backing, err)
		}
	}
	return nil
}

// lnode is the go-fuse face of a model node. Several may wrap one node;
// go-fuse keeps one per inode number.
type lnode struct {
	fs.Inode
	f *FS
	n *node
}

// handle is an open file; it is stale after a power loss. in is the
// kernel's inode of its file.
type handle struct {
	gen uint64
	in  *fs.Inode
}

var _ interface {
	fs.NodeGetattrer
	fs.NodeSetattrer
	fs.NodeLookuper
	fs.NodeOpendirer
	fs.NodeReaddirer
	fs.NodeMkdirer
	fs.NodeCreater
	fs.NodeUnlinker
	fs.NodeRmdirer
	fs.NodeRenamer
	fs.NodeOpener
	fs.NodeReader
	fs.NodeWriter
	fs.NodeFsyncer
	fs.NodeFlusher
	fs.NodeReleaser
	fs.NodeAllocater
	fs.NodeStatfser
	fs.NodeLinker
	fs.NodeSymlinker
	fs.NodeReadlinker
	fs.NodeMknoder
} = (*lnode)(nil)

func (l *lnode) lock() *model { l.f.m.mu.Lock(); return l.f.m }

func (l *lnode) unlock() { l.f.m.mu.Unlock() }

// stale reports whether fh was opened before the last power loss.
func (l *lnode) stale(fh fs.FileHandle) bool {
	h, ok := fh.(*handle)
	return ok && h.gen != l.f.m.gen
}

func fill(n *node, a *fuse.Attr) {
	a.Ino = n.ino
	a.Uid, a.Gid = n.uid, n.gid
	a.Mode = n.typ() | n.mode
	a.Nlink = n.nlink
	switch {
	case n.dir:
		a.Nlink = 2
		a.Size = 4096
	case n.kind != 0:
		a.Size = uint64(len(n.target))
	default:
		a.Size = uint64(n.live.size)
	}
	a.Blocks = (a.Size + 511) / 512
	a.Blksize = pageSize
	a.SetTimes(&n.mtime, &n.mtime, &n.ctime)
}

func (l *lnode) child(ctx context.Context, c *node) *fs.Inode {
	return l.NewInode(ctx, &lnode{f: l.f, n: c}, fs.StableAttr{Mode: c.typ(), Ino: c.ino})
}

// Getattr implements fs.NodeGetattrer.
func (l *lnode) Getattr(_ context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	l.lock()
	defer l.unlock()
	if l.n.dead {
		return syscall.ENOENT
	}
	fill(l.n, &out.Attr)
	return 0
}

// Setattr implements fs.NodeSetattrer.
func (l *lnode) Setattr(_ context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	m := l.lock()
	defer l.unlock()
	if l.n.dead || l.stale(fh) || m.off {
		return syscall.EIO
	}
	if sz, ok := in.GetSize(); ok {
		if l.n.dir {
			return syscall.EISDIR
		}
		if !l.n.regular() {
			return syscall.EINVAL
		}
		l.n.truncate(int64(sz))
	}
	if m, ok := in.GetMode(); ok {
		l.n.mode = m
	}
	if u, ok := in.GetUID(); ok {
		l.n.uid = u
	}
	if g, ok := in.GetGID(); ok {
		l.n.gid = g
	}
	if t, ok := in.GetMTime(); ok {
		l.n.mtime = t
	}
	l.n.ctime = time.Now()
	fill(l.n, &out.Attr)
	return 0
}

// Lookup implements fs.NodeLookuper.
func (l *lnode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if len(name) > nameMax {
		return nil, syscall.ENAMETOOLONG
	}
	l.lock()
	defer l.unlock()
	c, ok := l.n.kids[name]
	if !ok || l.n.dead {
		return nil, syscall.ENOENT
	}
	fill(c, &out.Attr)
	return l.child(ctx, c), 0
}

// Opendir implements fs.NodeOpendirer.
func (l *lnode) Opendir(context.Context) syscall.Errno {
	l.lock()
	defer l.unlock()
	if l.n.dead {
		return syscall.ENOENT
	}
	return 0
}

// Readdir implements fs.NodeReaddirer.
func (l *lnode) Readdir(context.Context) (fs.DirStream, syscall.Errno) {
	l.lock()
	defer l.unlock()
	if l.n.dead {
		return nil, syscall.ENOENT
	}
	var ents []fuse.DirEntry
	for _, name := range l.n.sortedNames() {
		c := l.n.kids[name]
		ents = append(ents, fuse.DirEntry{Name: name, Ino: c.ino, Mode: c.typ()})
	}
	return fs.NewListDirStream(ents), 0
}

func caller(ctx context.Context) (uint32, uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}

// Mkdir implements fs.NodeMkdirer.
func (l *lnode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return l.make(ctx, name, out, func(m *model, uid, gid uint32) *node { return m.newNode(true, mode, uid, gid) })
}

// Create implements fs.NodeCreater.
func (l *lnode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if len(name) > nameMax {
		return nil, nil, 0, syscall.ENAMETOOLONG
	}
	l.f.arming()
	m := l.lock()
	defer l.unlock()
	if l.n.dead {
		return nil, nil, 0, syscall.ENOENT
	}
	if m.off {
		return nil, nil, 0, syscall.EIO
	}
	c, ok := l.n.kids[name]
	switch {
	case ok && flags&syscall.O_EXCL != 0:
		return nil, nil, 0, syscall.EEXIST
	case ok && c.dir:
		return nil, nil, 0, syscall.EISDIR
	case ok && !c.regular():
		// The kernel follows a symbolic link itself and opens a FIFO
		// itself: only a socket gets here.
		return nil, nil, 0, syscall.ENXIO
	case ok:
		if flags&syscall.O_TRUNC != 0 {
			c.truncate(0)
		}
	case m.noSpace():
		return nil, nil, 0, syscall.ENOSPC
	default:
		uid, gid := caller(ctx)
		c = m.newNode(false, mode, uid, gid)
		c.nlink = 1
		l.n.kids[name] = c
		l.n.mtime = time.Now()
	}
	fill(c, &out.Attr)
	in := l.child(ctx, c)
	h := &handle{gen: m.gen, in: in}
	l.f.open[h] = struct{}{}
	// No FOPEN_KEEP_CACHE: a name the kernel did not know may lead to a
	// node it knows (and whose pages it holds), truncated here.
	return in, h, 0, 0
}

// Unlink implements fs.NodeUnlinker.
func (l *lnode) Unlink(ctx context.Context, name string) syscall.Errno {
	errno := l.unlink(name)
	if errno == 0 {
		l.tell(ctx, "unlink", name)
	}
	return errno
}

func (l *lnode) unlink(name string) syscall.Errno {
	m := l.lock()
	defer l.unlock()
	c, ok := l.n.kids[name]
	switch {
	case !ok || l.n.dead:
		return syscall.ENOENT
	case m.off:
		return syscall.EIO
	case c.dir:
		return syscall.EISDIR
	}
	delete(l.n.kids, name)
	c.nlink--
	now := time.Now()
	l.n.mtime, c.ctime = now, now
	return 0
}

// Rmdir implements fs.NodeRmdirer.
func (l *lnode) Rmdir(_ context.Context, name string) syscall.Errno {
	m := l.lock()
	defer l.unlock()
	c, ok := l.n.kids[name]
	switch {
	case !ok || l.n.dead:
		return syscall.ENOENT
	case m.off:
		return syscall.EIO
	case !c.dir:
		return syscall.ENOTDIR
	case len(c.kids) > 0:
		return syscall.ENOTEMPTY
	}
	delete(l.n.kids, name)
	l.n.mtime = time.Now()
	return 0
}

// The flags of renameat2(2).
const (
	renameNoReplace = 1
	renameExchange  = 2
)

// Rename implements fs.NodeRenamer: it changes the live entries of both
// directories only; each becomes durable with its directory's fsync.
func (l *lnode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	errno := l.rename(name, newParent, newName, flags)
	if np, ok := newParent.(*lnode); ok && errno == 0 {
		np.tell(ctx, "rename", newName)
	}
	return errno
}

func (l *lnode) rename(name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if len(newName) > nameMax {
		return syscall.ENAMETOOLONG
	}
	m := l.lock()
	defer l.unlock()
	np, ok := newParent.(*lnode)
	if !ok {
		return syscall.EXDEV
	}
	src, dst := l.n, np.n
	c, ok := src.kids[name]
	if !ok || src.dead || dst.dead {
		return syscall.ENOENT
	}
	if m.off {
		return syscall.EIO
	}
	old, exists := dst.kids[newName]
	switch {
	case flags&renameExchange != 0:
		if !exists {
			return syscall.ENOENT
		}
		src.kids[name], dst.kids[newName] = old, c
	case exists && flags&renameNoReplace != 0:
		return syscall.EEXIST
	case exists && old == c:
		return 0
	case exists && old.dir && !c.dir:
		return syscall.EISDIR
	case exists && !old.dir && c.dir:
		return syscall.ENOTDIR
	case exists && old.dir && len(old.kids) > 0:
		return syscall.ENOTEMPTY
	default:
		if c.dir && isAncestor(c, dst) {
			return syscall.EINVAL
		}
		delete(src.kids, name)
		dst.kids[newName] = c
		if exists && !old.dir {
			old.nlink--
		}
	}
	now := time.Now()
	src.mtime, dst.mtime, c.ctime = now, now, now
	return 0
}

// isAncestor reports whether dir a is d or holds d, live.
func isAncestor(a, d *node) bool {
	if a == d {
		return true
	}
	for _, k := range a.kids {
		if k.dir && isAncestor(k, d) {
			return true
		}
	}
	return false
}

// Open implements fs.NodeOpener.
func (l *lnode) Open(_ context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	m := l.lock()
	defer l.unlock()
	if l.n.dead {
		return nil, 0, syscall.ENOENT
	}
	if flags&syscall.O_TRUNC != 0 && l.n.regular() {
		if m.off {
			return nil, 0, syscall.EIO
		}
		l.n.truncate(0)
	}
	h := &handle{gen: m.gen, in: l.EmbeddedInode()}
	l.f.open[h] = struct{}{}
	// FOPEN_KEEP_CACHE: the kernel keeps the pages it holds of the file
	// across opens (every write reaches it through the kernel; a power
	// loss drops them).
	return h, fuse.FOPEN_KEEP_CACHE, 0
}

// Read implements fs.NodeReader.
func (l *lnode) Read(_ context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	l.lock()
	defer l.unlock()
	if l.n.dead || l.stale(fh) {
		return nil, syscall.EIO
	}
	k := l.n.read(dest, off)
	return fuse.ReadResultData(dest[:k]), 0
}

// Write implements fs.NodeWriter.
func (l *lnode) Write(_ context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	l.f.arming()
	m := l.lock()
	defer l.unlock()
	if l.n.dead || l.stale(fh) || m.off {
		return 0, syscall.EIO
	}
	if m.noSpace() {
		return 0, syscall.ENOSPC
	}
	l.n.write(data, off)
	return uint32(len(data)), 0
}

// Fsync implements fs.NodeFsyncer, for files and directories alike.
func (l *lnode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	l.f.arming()
	m := l.lock()
	if l.n.dead || l.stale(fh) || m.off {
		l.unlock()
		return syscall.EIO
	}
	var slow func(DurableOp)
	if l.n.regular() {
		if errno := m.syncFault(l.n, func() string { return l.Path(nil) }); errno != 0 {
			l.unlock()
			return errno
		}
		slow = m.takeSlow()
	}
	m.fsync(l.n)
	l.unlock()
	op := "fsync"
	if flags&1 != 0 { // FUSE_FSYNC_FDATASYNC
		op = "fdatasync"
	}
	l.tell(ctx, op, "")
	if slow != nil {
		c, _ := fuse.FromContext(ctx)
		var pid uint32
		if c != nil {
			pid = c.Pid
		}
		slow(DurableOp{Pid: pid, Op: op, Path: l.Path(nil)})
	}
	return 0
}

// Flush implements fs.NodeFlusher: close(2) syncs nothing.
func (l *lnode) Flush(context.Context, fs.FileHandle) syscall.Errno { return 0 }

// Release implements fs.NodeReleaser.
func (l *lnode) Release(_ context.Context, fh fs.FileHandle) syscall.Errno {
	if h, ok := fh.(*handle); ok {
		l.lock()
		delete(l.f.open, h)
		l.unlock()
	}
	return 0
}

// Allocate implements fs.NodeAllocater (posix_fallocate): it grows the
// file, as the data it would hold is zeros.
func (l *lnode) Allocate(_ context.Context, fh fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	l.f.arming()
	m := l.lock()
	defer l.unlock()
	if l.n.dead || l.stale(fh) || m.off {
		return syscall.EIO
	}
	if m.noSpace() {
		return syscall.ENOSPC
	}
	const keepSize = 1 // FALLOC_FL_KEEP_SIZE
	if mode&^keepSize != 0 {
		return syscall.EOPNOTSUPP
	}
	if end := int64(off + size); mode&keepSize == 0 && end > l.n.live.size {
		l.n.truncate(end)
	}
	return 0
}

// nameMax is the longest name, in bytes, as on ext4, XFS and tmpfs (the
// kernel lets a FUSE file system take up to 1024): a longer one fails
// with ENAMETOOLONG, as it would on the disk the mount stands for (and
// the backing directory could not hold it).
const nameMax = 255

// Statfs implements fs.NodeStatfser: a roomy disk, so that no program
// thinks it full, unless it is (SetFull).
func (l *lnode) Statfs(_ context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize, out.Frsize = pageSize, pageSize
	out.Blocks, out.Bfree, out.Bavail = 1<<24, 1<<23, 1<<23
	l.lock()
	if l.f.m.disk.full {
		out.Bfree, out.Bavail = 0, 0
	}
	l.unlock()
	out.Files, out.Ffree = 1<<20, 1<<19
	out.NameLen = nameMax
	return 0
}

// Link implements fs.NodeLinker: a new name for a file, durable, as any
// entry, once its directory is synced (the file's data stays the
// file's, whichever name it is synced by).
func (l *lnode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	in, errno := l.link(target, name, out)
	if errno == 0 {
		l.tell(ctx, "link", name)
	}
	return in, errno
}

func (l *lnode) link(target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if len(name) > nameMax {
		return nil, syscall.ENAMETOOLONG
	}
	l.f.arming()
	m := l.lock()
	defer l.unlock()
	t, ok := target.(*lnode)
	switch {
	case !ok:
		return nil, syscall.EXDEV
	case l.n.dead || t.n.dead:
		return nil, syscall.ENOENT
	case t.n.dir:
		return nil, syscall.EPERM
	case m.off:
		return nil, syscall.EIO
	case m.noSpace():
		return nil, syscall.ENOSPC
	}
	if _, ok := l.n.kids[name]; ok {
		return nil, syscall.EEXIST
	}
	l.n.kids[name] = t.n
	t.n.nlink++
	now := time.Now()
	l.n.mtime, t.n.ctime = now, now
	fill(t.n, &out.Attr)
	return t.EmbeddedInode(), 0
}

// Symlink implements fs.NodeSymlinker: the link and its target are
// durable together, once its directory is synced.
func (l *lnode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return l.special(ctx, syscall.S_IFLNK, target, name, 0o777, out)
}

// Readlink implements fs.NodeReadlinker.
func (l *lnode) Readlink(context.Context) ([]byte, syscall.Errno) {
	l.lock()
	defer l.unlock()
	switch {
	case l.n.dead:
		return nil, syscall.ENOENT
	case l.n.kind != syscall.S_IFLNK:
		return nil, syscall.EINVAL
	}
	return []byte(l.n.target), 0
}

// Mknod implements fs.NodeMknoder: a regular file (empty, as Create
// makes it), a FIFO or a socket (bind(2) of a Unix socket makes one).
// Device nodes are refused, as on a file system mounted nodev.
func (l *lnode) Mknod(ctx context.Context, name string, mode uint32, _ uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	switch kind := mode & syscall.S_IFMT; kind {
	case syscall.S_IFREG, 0:
		return l.make(ctx, name, out, func(m *model, uid, gid uint32) *node { return m.newNode(false, mode, uid, gid) })
	case syscall.S_IFIFO, syscall.S_IFSOCK:
		return l.special(ctx, kind, "", name, mode, out)
	}
	return nil, syscall.EPERM
}

// special makes a symbolic link, a FIFO or a socket named name.
func (l *lnode) special(ctx context.Context, kind uint32, target, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return l.make(ctx, name, out, func(m *model, uid, gid uint32) *node { return m.newSpecial(kind, target, mode, uid, gid) })
}

// make adds the node that mk makes as name, a new entry of l.
func (l *lnode) make(ctx context.Context, name string, out *fuse.EntryOut, mk func(m *model, uid, gid uint32) *node) (*fs.Inode, syscall.Errno) {
	if len(name) > nameMax {
		return nil, syscall.ENAMETOOLONG
	}
	l.f.arming()
	m := l.lock()
	defer l.unlock()
	if l.n.dead {
		return nil, syscall.ENOENT
	}
	if _, ok := l.n.kids[name]; ok {
		return nil, syscall.EEXIST
	}
	if m.off {
		return nil, syscall.EIO
	}
	if m.noSpace() {
		return nil, syscall.ENOSPC
	}
	uid, gid := caller(ctx)
	c := mk(m, uid, gid)
	c.nlink = 1 // a directory reports 2 whatever it holds
	l.n.kids[name] = c
	l.n.mtime = time.Now()
	fill(c, &out.Attr)
	return l.child(ctx, c), 0
}
