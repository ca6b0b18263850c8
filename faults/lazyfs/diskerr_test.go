package lazyfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// openRW opens path for writing (created when missing).
func openRW(t *testing.T, path string) *os.File {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	return fh
}

func writeAt(t *testing.T, fh *os.File, s string, off int64) {
	t.Helper()
	if _, err := fh.WriteAt([]byte(s), off); err != nil {
		t.Fatalf("write %q at %d: %v", s, off, err)
	}
}

// A failed fsync drops what it had to write, as Linux does: the process
// still reads it (the page cache holds it, clean), a second fsync
// succeeds, and the data is not durable: a power loss loses it.
func TestFailedSyncDropsTheUnsyncedData(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	writeFile(t, p, "synced v1", true)
	syncDir(t, f.Dir())
	fh := openRW(t, p)
	writeAt(t, fh, "written v2", 0)
	f.FailNextSync()
	if err := fh.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the armed fsync returned %v, want EIO", err)
	}
	if got := readOf(t, p); got != "written v2" {
		t.Fatalf("after the failed fsync the page cache serves %q, want the written %q", got, "written v2")
	}
	if err := fh.Sync(); err != nil {
		t.Fatalf("the fsync after the failed one: %v (the error is reported once)", err)
	}
	st := f.DiskStats()
	if st.SyncErrors != 1 || st.Dropped != pageSize {
		t.Errorf("stats %+v, want 1 sync error and one dropped page", st)
	}
	f.PowerLoss()
	if got := readOf(t, p); got != "synced v1" {
		t.Fatalf("after the power loss the file holds %q: the fsync retried after EIO made the dropped data durable; want %q", got, "synced v1")
	}
}

// After a failed fsync, a drop of the page cache shows the synced data
// again, without a power loss; what is written and synced afterwards is
// durable.
func TestFailedSyncDataIsGoneAfterACacheDrop(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	writeFile(t, p, "synced v1", true)
	syncDir(t, f.Dir())
	fh := openRW(t, p)
	writeAt(t, fh, "written v2, longer", 0)
	f.FailNextSync()
	if err := fh.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the armed fsync returned %v, want EIO", err)
	}
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
	f.DropCaches()
	if got := readOf(t, p); got != "synced v1" {
		t.Fatalf("after the cache drop the file reads %q, want the synced %q", got, "synced v1")
	}
	writeAt(t, fh, "v3", 0)
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
	f.PowerLoss()
	if got := readOf(t, p); got != "v3nced v1" {
		t.Fatalf("a write synced after the cache drop: the file holds %q after a power loss, want %q", got, "v3nced v1")
	}
}

// Only the file whose fsync failed loses data, and only the pages not
// written again: a page written after the error is dirty again and is
// written back whole, with what the cache held of it.
func TestFailedSyncLosesOnlyItsFilesCleanPages(t *testing.T) {
	f := mount(t)
	a, b := filepath.Join(f.Dir(), "a"), filepath.Join(f.Dir(), "b")
	writeFile(t, a, strings.Repeat("0", 3*pageSize), true)
	writeFile(t, b, "b synced", true)
	syncDir(t, f.Dir())
	fa, fb := openRW(t, a), openRW(t, b)
	writeAt(t, fa, strings.Repeat("1", 2*pageSize), 0) // pages 0 and 1
	writeAt(t, fb, "b written", 0)
	f.FailNextSync()
	if err := fa.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the armed fsync returned %v, want EIO", err)
	}
	writeAt(t, fa, "2", pageSize) // page 1 is dirty again
	if err := fa.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fb.Sync(); err != nil {
		t.Fatalf("the other file's fsync: %v", err)
	}
	f.PowerLoss()
	want := strings.Repeat("0", pageSize) + "2" + strings.Repeat("1", pageSize-1) + strings.Repeat("0", pageSize)
	if got := readOf(t, a); got != want {
		t.Errorf("a holds %s after the power loss, want page 0 old (dropped), page 1 written back whole, page 2 old", describePages(got))
	}
	if got := readOf(t, b); got != "b written" {
		t.Errorf("the other file holds %q: its own fsync succeeded, want %q", got, "b written")
	}
}

// describePages says what each 4 KiB page of s starts with.
func describePages(s string) string {
	var out []string
	for i := 0; i < len(s); i += pageSize {
		out = append(out, s[i:i+1])
	}
	return strings.Join(out, "")
}

// A torn power loss never brings back what a failed fsync dropped: it
// tears only what is still to be written.
func TestTornPowerLossKeepsNothingAFailedSyncDropped(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	const pages = 4
	for seed := int64(1); seed <= 8; seed++ {
		writeFile(t, p, strings.Repeat("a", pages*pageSize), true)
		syncDir(t, f.Dir())
		fh, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		writeAt(t, fh, strings.Repeat("b", pages*pageSize), 0)
		f.FailNextSync()
		if err := fh.Sync(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("the armed fsync returned %v, want EIO", err)
		}
		writeAt(t, fh, strings.Repeat("c", pageSize), 0) // page 0 dirty again
		fh.Close()
		loss := f.PowerLossTorn(seed)
		got := readOf(t, p)
		if strings.Contains(got, "b") {
			t.Fatalf("seed %d: the torn power loss kept data the failed fsync dropped: pages %s", seed, describePages(got))
		}
		if loss.Changes != 1 || !strings.HasPrefix(got, "c") {
			t.Fatalf("seed %d: %d changes torn, file pages %s: want the one page written after the error, kept", seed, loss.Changes, describePages(got))
		}
	}
}

// A full disk fails writes, new names and the fsync of un-synced data
// with ENOSPC (dropping that data as a failed writeback does) and reports
// no free blocks; once the space is back, writes and syncs work again.
func TestFullDiskFailsWritesAndSyncsUntilSpaceComesBack(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	writeFile(t, p, "synced", true)
	syncDir(t, f.Dir())
	fh := openRW(t, p)
	writeAt(t, fh, "before the disk filled", 0)
	clean := openRW(t, filepath.Join(f.Dir(), "clean"))
	f.SetFull(true)
	if _, err := fh.WriteAt([]byte("x"), 0); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("a write to a full disk returned %v, want ENOSPC", err)
	}
	if _, err := os.Create(filepath.Join(f.Dir(), "new")); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("a create on a full disk returned %v, want ENOSPC", err)
	}
	if err := os.Mkdir(filepath.Join(f.Dir(), "d"), 0o755); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("a mkdir on a full disk returned %v, want ENOSPC", err)
	}
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(f.Dir(), &sfs); err != nil || sfs.Bavail != 0 {
		t.Errorf("statfs of a full disk: %v, %d blocks available, want 0", err, sfs.Bavail)
	}
	if err := clean.Sync(); err != nil {
		t.Errorf("the fsync of a file with nothing to write on a full disk: %v", err)
	}
	if err := fh.Sync(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the fsync of un-synced data on a full disk returned %v, want ENOSPC", err)
	}
	if err := os.Rename(p, filepath.Join(f.Dir(), "b")); err != nil {
		t.Errorf("a rename on a full disk: %v", err)
	}
	if st := f.DiskStats(); st.NoSpace != 4 || st.Dropped == 0 {
		t.Errorf("stats %+v, want 4 operations refused for space and the data dropped", st)
	}
	f.SetFull(false)
	writeAt(t, fh, "after", 0)
	if err := fh.Sync(); err != nil {
		t.Fatalf("fsync once the space is back: %v", err)
	}
	f.PowerLoss()
	// The rename was not synced: the old name is back, with the data the
	// fsync after the space came back wrote (its page, written again)
	// and the size it synced.
	if got := readOf(t, p); got != "aftere the disk filled" {
		t.Errorf("after the power loss the file holds %q, want %q", got, "aftere the disk filled")
	}
}

// A slow sync calls the harness's hook once, after the data is durable
// and before the fsync returns; the next fsync does not call it.
func TestSlowSyncCallsItsHookBeforeTheFsyncReturns(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	writeFile(t, p, "synced", true)
	syncDir(t, f.Dir())
	fh := openRW(t, p)
	writeAt(t, fh, "slowly ", 0)
	returned := false
	var seen []DurableOp
	copyDir := filepath.Join(t.TempDir(), "durable")
	f.SlowNextSync(func(op DurableOp) {
		seen = append(seen, op)
		if returned {
			t.Errorf("the hook ran after the fsync returned")
		}
		if err := f.CopyDurable(copyDir); err != nil {
			t.Error(err)
		}
	})
	if err := syscall.Fdatasync(int(fh.Fd())); err != nil {
		t.Fatal(err)
	}
	returned = true
	if len(seen) != 1 || seen[0].Op != "fdatasync" || seen[0].Path != "a" || seen[0].Pid == 0 {
		t.Fatalf("the hook saw %+v, want one fdatasync of a with the caller's pid", seen)
	}
	if b, err := os.ReadFile(filepath.Join(copyDir, "a")); err != nil || string(b) != "slowly " {
		t.Fatalf("in the hook the durable file held %q (%v), want the synced %q", b, err, "slowly ")
	}
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || f.DiskStats().SlowSyncs != 1 {
		t.Fatalf("the hook ran %d times (stats %+v), want once", len(seen), f.DiskStats())
	}
}

// BeforeIO runs before the operations a disk error acts on, so a harness
// arms an error there at the instant a process asks for it.
func TestBeforeIOArmsTheNextOperation(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	fh := openRW(t, p)
	armed := false
	f.BeforeIO(func() {
		if !armed {
			armed = true
			f.FailNextSync()
		}
	})
	writeAt(t, fh, "x", 0)
	if err := fh.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the fsync after BeforeIO armed an error returned %v, want EIO", err)
	}
	f.BeforeIO(nil)
	f.DisarmDisk()
	f.FailNextSync()
	f.DisarmDisk()
	writeAt(t, fh, "y", 0)
	if err := fh.Sync(); err != nil {
		t.Fatalf("an fsync after DisarmDisk: %v", err)
	}
}

// FailNextSyncOf fails the next fsync of a file it accepts only: the
// fsync of another file before it succeeds and stays durable.
func TestFailNextSyncOfSkipsOtherFiles(t *testing.T) {
	f := mount(t)
	open := map[string]*os.File{}
	for _, n := range []string{"a", "b"} {
		writeFile(t, filepath.Join(f.Dir(), n), n+" v1", true)
		open[n] = openRW(t, filepath.Join(f.Dir(), n))
	}
	syncDir(t, f.Dir())
	for n, fh := range open {
		writeAt(t, fh, n+" v2", 0)
	}
	f.FailNextSyncOf(func(path string) bool { return path == "b" })
	if err := open["a"].Sync(); err != nil {
		t.Fatalf("the fsync of a, not accepted: %v", err)
	}
	if err := open["b"].Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the fsync of b returned %v, want EIO", err)
	}
	f.PowerLoss()
	for n, want := range map[string]string{"a": "a v2", "b": "b v1"} {
		if got := readOf(t, filepath.Join(f.Dir(), n)); got != want {
			t.Errorf("%s after the power loss: %q, want %q (a's fsync succeeded, b's failed and dropped v2)", n, got, want)
		}
	}
}
