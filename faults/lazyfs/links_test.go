package lazyfs

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// nlink is path's link count and inode number, by lstat.
func nlink(t *testing.T, path string) (uint64, uint64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Nlink, st.Ino
}

// A hard link is a name like any other: durable once its directory is
// synced; until then a power loss takes it away and leaves the file.
func TestHardLinkNeedsItsDirectoryFsync(t *testing.T) {
	f := mount(t)
	a, b := filepath.Join(f.Dir(), "a"), filepath.Join(f.Dir(), "b")
	writeFile(t, a, "data", true)
	syncDir(t, f.Dir())
	if err := os.Link(a, b); err != nil {
		t.Fatalf("link(2) on the lazy file system: %v", err)
	}
	na, ia := nlink(t, a)
	nb, ib := nlink(t, b)
	if na != 2 || nb != 2 || ia != ib {
		t.Fatalf("after link: a has %d links (inode %d), b %d (inode %d); want 2 each, one inode", na, ia, nb, ib)
	}
	if err := os.Link(a, b); !os.IsExist(err) {
		t.Fatalf("link onto an existing name: %v, want EEXIST", err)
	}
	loss := f.PowerLoss()
	if got := readOf(t, b); got != "<absent>" {
		t.Fatalf("a link whose directory was never synced survived the power loss with %q", got)
	}
	if got := readOf(t, a); got != "data" {
		t.Fatalf("the file linked lost its own name: %q", got)
	}
	if n, _ := nlink(t, a); n != 1 || loss.Names != 1 {
		t.Fatalf("after the power loss a has %d links and the loss counts %d names; want 1 and 1", n, loss.Names)
	}
}

// Data belongs to the file, not to the name it was synced by; removing
// one name leaves the other.
func TestHardLinkSharesDataAndOutlivesTheOtherName(t *testing.T) {
	f := mount(t)
	a, b := filepath.Join(f.Dir(), "a"), filepath.Join(f.Dir(), "b")
	writeFile(t, a, "first", true)
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	syncDir(t, f.Dir())
	writeFile(t, b, "second", true) // through the other name
	if got := readOf(t, a); got != "second" {
		t.Fatalf("a write through one name is not seen through the other: %q", got)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if n, _ := nlink(t, b); n != 1 {
		t.Fatalf("after unlinking one of two names the file has %d links, want 1", n)
	}
	syncDir(t, f.Dir())
	f.PowerLoss()
	if got, gone := readOf(t, b), readOf(t, a); got != "second" || gone != "<absent>" {
		t.Fatalf("after the power loss b holds %q and a %q; want %q and absent", got, gone, "second")
	}
	// A rename onto another name of the same file changes nothing (POSIX).
	if err := os.Link(b, a); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	if readOf(t, a) != "second" || readOf(t, b) != "second" {
		t.Fatal("rename of one name of a file onto another removed one")
	}
}

// The exclusive publish that stores use (write a temporary file, sync
// it, link it to its final name, which fails if taken) survives once the
// directory is synced.
func TestLinkPublishesExclusively(t *testing.T) {
	f := mount(t)
	tmp, dst := filepath.Join(f.Dir(), "txn.tmp"), filepath.Join(f.Dir(), "txn-1")
	writeFile(t, tmp, "one", true)
	if err := os.Link(tmp, dst); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(f.Dir(), "other.tmp"), "two", true)
	if err := os.Link(filepath.Join(f.Dir(), "other.tmp"), dst); !os.IsExist(err) {
		t.Fatalf("a second publish onto the same name: %v, want EEXIST", err)
	}
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	syncDir(t, f.Dir())
	f.PowerLoss()
	if got := readOf(t, dst); got != "one" {
		t.Fatalf("published and synced, the file holds %q after the power loss", got)
	}
}

// A symbolic link and its target are durable with the directory entry.
func TestSymlinkIsDurableWithItsDirectory(t *testing.T) {
	f := mount(t)
	a := filepath.Join(f.Dir(), "data-1")
	cur, lost := filepath.Join(f.Dir(), "current"), filepath.Join(f.Dir(), "lost")
	writeFile(t, a, "one", true)
	if err := os.Symlink("data-1", cur); err != nil {
		t.Fatalf("symlink(2) on the lazy file system: %v", err)
	}
	syncDir(t, f.Dir())
	if err := os.Symlink("data-1", lost); err != nil {
		t.Fatal(err)
	}
	if got := readOf(t, cur); got != "one" {
		t.Fatalf("reading through the link: %q", got)
	}
	f.PowerLoss()
	if target, err := os.Readlink(cur); err != nil || target != "data-1" {
		t.Fatalf("a synced symbolic link after the power loss: %q, %v", target, err)
	}
	if got := readOf(t, cur); got != "one" {
		t.Fatalf("reading through the link after the power loss: %q", got)
	}
	if _, err := os.Lstat(lost); !os.IsNotExist(err) {
		t.Fatalf("a symbolic link whose directory was not synced survived: %v", err)
	}
	// Repointing a link the way programs do: a new link, renamed over.
	writeFile(t, filepath.Join(f.Dir(), "data-2"), "two", true)
	if err := os.Symlink("data-2", cur+".new"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(cur+".new", cur); err != nil {
		t.Fatal(err)
	}
	if got := readOf(t, cur); got != "two" {
		t.Fatalf("after repointing: %q", got)
	}
	f.PowerLoss()
	if got := readOf(t, cur); got != "one" {
		t.Fatalf("a repointing whose directory was not synced survived: the link leads to %q", got)
	}
}

// bind(2) of a Unix socket and mkfifo work on the mount, and their names
// follow the rule.
func TestSocketsAndFIFOsFollowTheRule(t *testing.T) {
	f := mount(t)
	sock, fifo := filepath.Join(f.Dir(), "s.sock"), filepath.Join(f.Dir(), "fifo")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("a Unix socket on the lazy file system: %v", err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("connecting to a Unix socket on the lazy file system: %v", err)
	}
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil || string(buf) != "hi" {
		t.Fatalf("through the socket: %q, %v", buf, err)
	}
	c.Close()
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo on the lazy file system: %v", err)
	}
	syncDir(t, f.Dir())
	if err := syscall.Mknod(filepath.Join(f.Dir(), "dev"), syscall.S_IFCHR|0o600, 0x0103); err != syscall.EPERM {
		t.Fatalf("a device node: %v, want EPERM", err)
	}
	f.PowerLoss()
	for p, want := range map[string]os.FileMode{sock: os.ModeSocket, fifo: os.ModeNamedPipe} {
		info, err := os.Lstat(p)
		if err != nil || info.Mode().Type() != want {
			t.Fatalf("%s after the power loss: %v, %v; want a %v", filepath.Base(p), info, err, want)
		}
	}
}

// O_SYNC and O_DSYNC writes are synced writes: the kernel follows each
// with an fsync, which the model counts. A store that opens its log so
// (Java's RandomAccessFile "rwd", PostgreSQL's open_datasync) must not
// lose them.
func TestSyncOpenFlagsMakeWritesDurable(t *testing.T) {
	for _, c := range []struct {
		name string
		flag int
		want string
	}{{"O_SYNC", syscall.O_SYNC, "new"}, {"O_DSYNC", syscall.O_DSYNC, "new"}, {"neither", 0, "old"}} {
		f := mount(t)
		p := filepath.Join(f.Dir(), "log")
		writeFile(t, p, "old", true)
		syncDir(t, f.Dir())
		h, err := os.OpenFile(p, os.O_RDWR|c.flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.WriteAt([]byte("new"), 0); err != nil {
			t.Fatal(err)
		}
		h.Close()
		f.PowerLoss()
		if got := readOf(t, p); got != c.want {
			t.Errorf("a write opened with %s holds %q after the power loss, want %q", c.name, got, c.want)
		}
	}
}

// The backing directory keeps links, symbolic links and FIFOs, both ways.
func TestBackingKeepsLinksAndSpecialFiles(t *testing.T) {
	requireFUSE(t)
	base := t.TempDir()
	mnt, backing := filepath.Join(base, "mnt"), filepath.Join(base, "disk")
	for _, d := range []string{mnt, backing} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(backing, "a"), []byte("pre"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.Link(filepath.Join(backing, "a"), filepath.Join(backing, "b")),
		os.Symlink("a", filepath.Join(backing, "s")),
		syscall.Mkfifo(filepath.Join(backing, "p"), 0o600),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	f, err := Mount(mnt, Options{Backing: backing})
	if err != nil {
		t.Fatal(err)
	}
	na, ia := nlink(t, filepath.Join(mnt, "a"))
	_, ib := nlink(t, filepath.Join(mnt, "b"))
	if na != 2 || ia != ib {
		t.Errorf("loaded hard links: a has %d links, inodes %d and %d", na, ia, ib)
	}
	if target, err := os.Readlink(filepath.Join(mnt, "s")); err != nil || target != "a" {
		t.Errorf("loaded symbolic link: %q, %v", target, err)
	}
	writeFile(t, filepath.Join(mnt, "b"), "post", true)
	if err := os.Link(filepath.Join(mnt, "a"), filepath.Join(mnt, "c")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mnt)
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	n, ia := nlink(t, filepath.Join(backing, "a"))
	_, ic := nlink(t, filepath.Join(backing, "c"))
	if n != 3 || ia != ic || readOf(t, filepath.Join(backing, "a")) != "post" {
		t.Errorf("written back: a has %d links (want 3, one inode with c) and holds %q", n, readOf(t, filepath.Join(backing, "a")))
	}
	if target, err := os.Readlink(filepath.Join(backing, "s")); err != nil || target != "a" {
		t.Errorf("written back symbolic link: %q, %v", target, err)
	}
	if info, err := os.Lstat(filepath.Join(backing, "p")); err != nil || info.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("written back FIFO: %v, %v", info, err)
	}
}

// File locks are the kernel's own on the mount; a shared mapping's pages
// reach the file system when they are synced (msync(MS_SYNC) is an
// fsync) or unmapped, and are lost with the power unless synced.
func TestLocksAndSharedMappings(t *testing.T) {
	f := mount(t)
	for _, c := range []struct {
		name string
		sync bool
		want string
	}{{"msync", true, "mapped"}, {"unmapped only", false, "synced"}} {
		p := filepath.Join(f.Dir(), "m")
		writeFile(t, p, "synced", true)
		syncDir(t, f.Dir())
		h, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(h.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatalf("flock: %v", err)
		}
		lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 0}
		if err := syscall.FcntlFlock(h.Fd(), syscall.F_SETLK, &lk); err != nil {
			t.Fatalf("fcntl lock: %v", err)
		}
		mem, err := syscall.Mmap(int(h.Fd()), 0, 6, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			t.Fatalf("a shared writable mapping: %v", err)
		}
		copy(mem, "mapped")
		if c.sync {
			if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
				t.Fatalf("msync: %v", err)
			}
		}
		if err := syscall.Munmap(mem); err != nil {
			t.Fatal(err)
		}
		h.Close()
		if got := readOf(t, p); got != "mapped" {
			t.Fatalf("%s: what the mapping wrote does not read back: %q", c.name, got)
		}
		f.PowerLoss()
		if got := readOf(t, p); got != c.want {
			t.Errorf("%s: the file holds %q after the power loss, want %q", c.name, got, c.want)
		}
	}
}
