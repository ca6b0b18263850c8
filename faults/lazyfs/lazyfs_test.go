package lazyfs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// requireFUSE fails the test when no lazy file system can be mounted here:
// make test runs as root where FUSE works, and a suite that skipped the
// durability rule would pass with nothing tested.
func requireFUSE(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		t.Fatalf("power loss cannot be tested on this machine (%v): the lazy file system needs /dev/fuse and root", err)
	}
}

// mount mounts a lazy file system for one test and unmounts it after.
func mount(t testing.TB) *FS {
	t.Helper()
	requireFUSE(t)
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := Mount(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return f
}

// writeFile writes path and fsyncs it when sync is set.
func writeFile(t *testing.T, path, data string, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

// openSynced writes path with data, syncs it and its directory, and
// opens it for reading and writing until the test ends.
func openSynced(t *testing.T, f *FS, path, data string) *os.File {
	t.Helper()
	writeFile(t, path, data, true)
	syncDir(t, f.Dir())
	h, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync dir %s: %v", dir, err)
	}
}

// readOf returns a file's content, or "<absent>".
func readOf(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteWithoutFsyncIsLost(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	writeFile(t, p, "synced", true)
	syncDir(t, f.Dir())
	writeFile(t, p, "not synced, longer", false)
	if got := readOf(t, p); got != "not synced, longer" {
		t.Fatalf("before the power loss: %q", got)
	}
	loss := f.PowerLoss()
	if got := readOf(t, p); got != "synced" {
		t.Fatalf("after the power loss the file holds %q, want the synced %q", got, "synced")
	}
	if loss.Bytes == 0 {
		t.Errorf("the power loss says it lost no bytes: %+v", loss)
	}
}

func TestSyncAllKeepsEverythingWrittenBefore(t *testing.T) {
	f := mount(t)
	if err := os.Mkdir(filepath.Join(f.Dir(), "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	before, after := filepath.Join(f.Dir(), "d", "before"), filepath.Join(f.Dir(), "d", "after")
	writeFile(t, before, "written before SyncAll", false)
	f.SyncAll()
	writeFile(t, after, "written after", false)
	f.PowerLoss()
	if got := readOf(t, before); got != "written before SyncAll" {
		t.Fatalf("a file (and its new directory) written before SyncAll holds %q after the power loss", got)
	}
	if got := readOf(t, after); got != "<absent>" {
		t.Fatalf("a file created after SyncAll and never synced survived with %q", got)
	}
}

// With journaled names (ext4, XFS) an fsync of one file makes every
// earlier namespace change durable, in every directory; data stays per
// file.
func TestJournaledNamesFsyncCommitsEveryName(t *testing.T) {
	requireFUSE(t)
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := Mount(dir, Options{JournaledNames: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Unmount()
	writeFile(t, filepath.Join(dir, "old"), "old data", true)
	syncDir(t, dir)
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "d", "unsynced"), "never synced", false)
	if err := os.Rename(filepath.Join(dir, "old"), filepath.Join(dir, "d", "moved")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "d", "synced"), "synced data", true)
	writeFile(t, filepath.Join(dir, "after"), "created after the last fsync", false)
	f.PowerLoss()
	for p, want := range map[string]string{
		"d/synced": "synced data", "d/moved": "old data", "old": "<absent>",
		"d/unsynced": "", // its name was committed, its data never synced
		"after":      "<absent>",
	} {
		if got := readOf(t, filepath.Join(dir, p)); got != want {
			t.Errorf("%s after the power loss: %q, want %q", p, got, want)
		}
	}
}

// A power loss says where its losses were: each name whose change it
// undid (first), then each file whose data it dropped, the largest first.
func TestPowerLossSaysWhatItLost(t *testing.T) {
	f := mount(t)
	dir := f.Dir()
	writeFile(t, filepath.Join(dir, "kept"), "synced", true)
	writeFile(t, filepath.Join(dir, "journal"), "synced", true)
	writeFile(t, filepath.Join(dir, "small"), "s", true)
	syncDir(t, dir)
	writeFile(t, filepath.Join(dir, "kept"), strings.Repeat("x", 2*pageSize), false)
	writeFile(t, filepath.Join(dir, "small"), "t", false)
	writeFile(t, filepath.Join(dir, "new"), "never named durably", true)
	if err := os.Remove(filepath.Join(dir, "journal")); err != nil {
		t.Fatal(err)
	}
	loss := f.PowerLoss()
	var got []string
	for _, l := range loss.Files {
		got = append(got, l.String())
	}
	want := []string{
		"journal: removed, its directory not synced, so it is back",
		"new: created, its directory not synced, so it is gone",
		fmt.Sprintf("kept: %d bytes written and not synced", 2*pageSize),
		fmt.Sprintf("small: %d bytes written and not synced", pageSize),
	}
	if !slices.Equal(got, want) {
		t.Errorf("the power loss lost %q; want %q", got, want)
	}
}

func TestFsyncKeepsDataAndDirFsyncKeepsName(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	writeFile(t, p, "kept", true)
	syncDir(t, f.Dir())
	if loss := f.PowerLoss(); !reflect.DeepEqual(loss, Loss{}) {
		t.Errorf("nothing un-synced, yet the power loss lost %+v", loss)
	}
	if got := readOf(t, p); got != "kept" {
		t.Fatalf("a synced file in a synced directory holds %q after the power loss", got)
	}
}

func TestCreateWithoutDirFsyncIsGone(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "new")
	writeFile(t, p, "data synced, name not", true)
	f.PowerLoss()
	if got := readOf(t, p); got != "<absent>" {
		t.Fatalf("a file created without an fsync of its directory survived the power loss with %q", got)
	}
}

func TestNameSyncedDataNotComesBackEmpty(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "new")
	writeFile(t, p, "never synced", false)
	syncDir(t, f.Dir())
	f.PowerLoss()
	if got := readOf(t, p); got != "" {
		t.Fatalf("a file whose name was synced but not its data holds %q, want empty", got)
	}
}

// The rule for rename: not durable until the directory is fsynced. The
// old name comes back with its durable data, the new name holds what it
// durably held before (here: the old target).
func TestRenameWithoutDirFsyncIsUndone(t *testing.T) {
	f := mount(t)
	tmp, dst := filepath.Join(f.Dir(), "a.tmp"), filepath.Join(f.Dir(), "a")
	writeFile(t, dst, "old", true)
	writeFile(t, tmp, "new", true)
	syncDir(t, f.Dir())
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
	f.PowerLoss()
	if got := readOf(t, dst); got != "old" {
		t.Errorf("rename without a directory fsync: target holds %q after the power loss, want the old %q", got, "old")
	}
	if got := readOf(t, tmp); got != "new" {
		t.Errorf("rename without a directory fsync: source holds %q after the power loss, want it back with %q", got, "new")
	}
}

func TestRenameWithDirFsyncIsDurable(t *testing.T) {
	f := mount(t)
	tmp, dst := filepath.Join(f.Dir(), "a.tmp"), filepath.Join(f.Dir(), "a")
	writeFile(t, dst, "old", true)
	writeFile(t, tmp, "new", true)
	syncDir(t, f.Dir())
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
	syncDir(t, f.Dir())
	f.PowerLoss()
	if got, gone := readOf(t, dst), readOf(t, tmp); got != "new" || gone != "<absent>" {
		t.Fatalf("rename then directory fsync: target %q, source %q after the power loss; want %q and absent", got, gone, "new")
	}
}

func TestRenameAcrossDirectoriesNeedsBothFsyncs(t *testing.T) {
	f := mount(t)
	a, b := filepath.Join(f.Dir(), "a"), filepath.Join(f.Dir(), "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(a, "x"), "x", true)
	syncDir(t, a)
	syncDir(t, f.Dir())
	if err := os.Rename(filepath.Join(a, "x"), filepath.Join(b, "x")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, b) // the new name is durable, the old one not yet gone
	f.PowerLoss()
	if ga, gb := readOf(t, filepath.Join(a, "x")), readOf(t, filepath.Join(b, "x")); ga != "x" || gb != "x" {
		t.Fatalf("rename with only the target directory synced: source %q, target %q; want both names (the unlink of the source was not synced)", ga, gb)
	}
}

func TestUnlinkWithoutDirFsyncComesBack(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	writeFile(t, p, "durable", true)
	syncDir(t, f.Dir())
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	f.PowerLoss()
	if got := readOf(t, p); got != "durable" {
		t.Fatalf("unlink without a directory fsync: %q after the power loss, want the file back", got)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	syncDir(t, f.Dir())
	f.PowerLoss()
	if got := readOf(t, p); got != "<absent>" {
		t.Fatalf("unlink with a directory fsync: %q after the power loss, want it gone", got)
	}
}

func TestMkdirNeedsParentFsync(t *testing.T) {
	f := mount(t)
	d, e := filepath.Join(f.Dir(), "d"), filepath.Join(f.Dir(), "e")
	for _, x := range []string{d, e} {
		if err := os.Mkdir(x, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(x, "f"), "f", true)
		syncDir(t, x)
	}
	if err := os.Remove(filepath.Join(e, "f")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(e); err != nil {
		t.Fatal(err)
	}
	// d's entry and e's removal become durable together.
	syncDir(t, f.Dir())
	if err := os.Mkdir(filepath.Join(f.Dir(), "later"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.PowerLoss()
	ents, err := os.ReadDir(f.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range ents {
		names = append(names, x.Name())
	}
	if !slices.Equal(names, []string{"d"}) {
		t.Fatalf("after the power loss the root lists %v, want [d]", names)
	}
	if got := readOf(t, filepath.Join(d, "f")); got != "f" {
		t.Fatalf("d/f holds %q", got)
	}
}

func TestTruncateWithoutFsyncIsUndone(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	writeFile(t, p, strings.Repeat("x", 10000), true)
	syncDir(t, f.Dir())
	if err := os.Truncate(p, 3); err != nil {
		t.Fatal(err)
	}
	g, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt([]byte("yy"), 8190); err != nil {
		t.Fatal(err)
	}
	g.Close()
	if got := readOf(t, p); got != "xxx"+strings.Repeat("\x00", 8187)+"yy" {
		t.Fatalf("truncate then write past the end reads %d bytes %q...", len(got), got[:min(len(got), 8)])
	}
	f.PowerLoss()
	if got := readOf(t, p); got != strings.Repeat("x", 10000) {
		t.Fatalf("after the power loss %d bytes, want the synced 10000 x", len(got))
	}
}

func TestHandlesFromBeforePowerLossFail(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	g := openSynced(t, f, p, "durable")
	f.PowerLoss()
	if _, err := g.WriteAt([]byte("zombie"), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a write through a handle opened before the power loss: %v, want EIO", err)
	}
	if got := readOf(t, p); got != "durable" {
		t.Fatalf("the file holds %q", got)
	}
}

func TestBackingHoldsTheDurableState(t *testing.T) {
	requireFUSE(t)
	base := t.TempDir()
	mnt, backing := filepath.Join(base, "mnt"), filepath.Join(base, "disk")
	for _, d := range []string{mnt, backing} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(backing, "pre"), []byte("pre"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Mount(mnt, Options{Backing: backing})
	if err != nil {
		t.Fatal(err)
	}
	if got := readOf(t, filepath.Join(mnt, "pre")); got != "pre" {
		t.Fatalf("the mount does not serve the backing directory's file: %q", got)
	}
	writeFile(t, filepath.Join(mnt, "kept"), "kept", true)
	syncDir(t, mnt)
	writeFile(t, filepath.Join(mnt, "lost"), "lost", false)
	f.PowerLoss()
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(backing)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"kept", "pre"}) || readOf(t, filepath.Join(backing, "kept")) != "kept" {
		t.Fatalf("backing after a power loss and unmount: %v", names)
	}
}

// TestUnmountLeavesNoMount checks /proc/mounts itself.
func TestUnmountLeavesNoMount(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	f, err := Mount(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !inProcMounts(t, dir) {
		t.Fatalf("%s is not in /proc/mounts while mounted", dir)
	}
	// A busy mount (an open file) is detached rather than left behind.
	g, err := os.Create(filepath.Join(dir, "busy"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	if inProcMounts(t, dir) {
		t.Fatalf("%s is still in /proc/mounts after Unmount", dir)
	}
}

func inProcMounts(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if fs := strings.Fields(line); len(fs) > 2 && unescape(fs[1]) == dir {
			return true
		}
	}
	return false
}

// childEnv makes the test binary a helper process (see TestMain).
const childEnv = "LAZYFS_TEST_CHILD"

func TestMain(m *testing.M) {
	if c := os.Getenv(childEnv); c != "" {
		os.Exit(child(c))
	}
	os.Exit(m.Run())
}

// startChild runs the test binary as a helper doing what, and returns
// once it printed its first line (its result).
func startChild(t testing.TB, what string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+what)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		return cmd, s
	case <-time.After(60 * time.Second):
		t.Fatalf("helper %q said nothing in 60 s", what)
		return nil, ""
	}
}

// kill9 kills a helper with SIGKILL and waits for it.
func kill9(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// A supervisor killed by SIGKILL leaves its mount behind; CleanStale
// removes it, and leaves the mounts of live processes alone.
func TestCleanStaleRemovesMountsOfDeadProcesses(t *testing.T) {
	live := mount(t)
	dir := t.TempDir()
	cmd, line := startChild(t, "mount:"+dir)
	if line != "mounted" {
		t.Fatalf("helper: %q", line)
	}
	// Another run's mount, its process alive, is not stale.
	if gone, err := cleanStale(under(filepath.Dir(dir))); err != nil || slices.Contains(gone, dir) || !inProcMounts(t, dir) {
		t.Fatalf("CleanStale removed %v (err %v): the mount %s of a live process is another run's", gone, err, dir)
	}
	kill9(t, cmd)
	if !inProcMounts(t, dir) {
		t.Fatalf("the killed helper's mount %s is not in /proc/mounts: nothing stale to clean", dir)
	}
	gone, err := cleanStale(under(filepath.Dir(dir)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(gone, dir) {
		t.Errorf("CleanStale removed %v, not %s", gone, dir)
	}
	if inProcMounts(t, dir) {
		t.Fatalf("%s still in /proc/mounts after CleanStale", dir)
	}
	if !inProcMounts(t, live.Dir()) {
		t.Fatalf("CleanStale removed the live mount %s of this process", live.Dir())
	}
}

func child(what string) int {
	kind, arg, _ := strings.Cut(what, ":")
	switch kind {
	case "mount":
		if _, err := Mount(arg, Options{}); err != nil {
			os.Stdout.WriteString("error: " + err.Error() + "\n")
			return 1
		}
		os.Stdout.WriteString("mounted\n")
		select {}
	case "mount-busy":
		// Mount, then use the mount from this very process without
		// pause, so that a SIGKILL finds requests on its own mount in
		// flight (the process then cannot finish dying by itself).
		if _, err := Mount(arg, Options{}); err != nil {
			os.Stdout.WriteString("error: " + err.Error() + "\n")
			return 1
		}
		p := filepath.Join(arg, "f")
		for i := 0; i < 4; i++ {
			go func() {
				for {
					_ = os.WriteFile(p, []byte("x"), 0o644)
					_, _ = os.ReadFile(p)
				}
			}()
		}
		time.Sleep(50 * time.Millisecond)
		os.Stdout.WriteString("mounted\n")
		select {}
	case "sqlite":
		return sqliteChild(arg)
	}
	os.Stdout.WriteString("unknown helper " + what + "\n")
	return 2
}

// A torn power loss keeps some of the pages written and not synced, each
// whole: a 4 KiB page is all old or all new. Which ones depends on the
// seed alone (the same seed tears the same state the same way), and every
// seed keeps some and loses some of two changes or more.
func TestTornPowerLossKeepsWholePages(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	const pages = 8
	tear := func(seed int64) (string, Loss) {
		writeFile(t, p, strings.Repeat("a", pages*pageSize), true)
		syncDir(t, f.Dir())
		writeFile(t, p, strings.Repeat("b", pages*pageSize), false)
		loss := f.PowerLossTorn(seed)
		return keptUnits(t, readOf(t, p), pages*pageSize, pageSize, seed), loss
	}
	shapes := map[string]bool{}
	for seed := int64(1); seed <= 10; seed++ {
		got, loss := tear(seed)
		news := strings.Count(got, "K")
		if news == 0 || news == pages {
			t.Errorf("seed %d kept %d of %d un-synced pages (%s): a torn power loss keeps some and loses some", seed, news, pages, got)
		}
		if !loss.Torn || loss.Changes != pages || loss.Kept != news || loss.Bytes != int64(pages-news)*pageSize {
			t.Errorf("seed %d: loss %+v, want torn, %d changes, %d kept, %d bytes lost", seed, loss, pages, news, (pages-news)*pageSize)
		}
		if again, _ := tear(seed); again != got {
			t.Errorf("seed %d tore %s, then %s on the same state", seed, got, again)
		}
		shapes[got] = true
	}
	if len(shapes) < 3 {
		t.Errorf("10 seeds tore the same pages in only %d ways: %v", len(shapes), shapes)
	}
}

// Torn at 512-byte sectors, a page written and not synced can survive in
// part: each sector is all old or all new, a sector the write left as it
// was is no change, and pages come out torn inside.
func TestTornPowerLossAtSectors(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	const pages, per = 2, pageSize / SectorSize
	tear := func(seed int64) (string, Loss) {
		writeFile(t, p, strings.Repeat("a", pages*pageSize), true)
		syncDir(t, f.Dir())
		// Every sector new but the fifth, written with what it held.
		next := []byte(strings.Repeat("b", pages*pageSize))
		copy(next[4*SectorSize:5*SectorSize], strings.Repeat("a", SectorSize))
		writeFile(t, p, string(next), false)
		loss := f.Cut(Tear{Unit: SectorSize, Seed: seed})
		return keptUnits(t, readOf(t, p), pages*pageSize, SectorSize, seed), loss
	}
	insidePages := 0
	for seed := int64(1); seed <= 10; seed++ {
		got, loss := tear(seed)
		news := strings.Count(got, "K")
		if got[4] != '.' {
			t.Errorf("seed %d: the sector written with what it held reads as new", seed)
		}
		if news == 0 || news == pages*per-1 {
			t.Errorf("seed %d kept %d of %d un-synced sectors (%s): a torn power loss keeps some and loses some", seed, news, pages*per-1, got)
		}
		if !loss.Torn || loss.Unit != SectorSize || loss.Changes != pages*per-1 || loss.Kept != news {
			t.Errorf("seed %d: loss %+v, want torn at %d bytes, %d changes, %d kept", seed, loss, SectorSize, pages*per-1, news)
		}
		if again, _ := tear(seed); again != got {
			t.Errorf("seed %d tore %s, then %s on the same state", seed, got, again)
		}
		if pg := got[per : 2*per]; strings.Contains(pg, "K") && strings.Contains(pg, ".") { // the second page: all of it new
			insidePages++
		}
	}
	if insidePages == 0 {
		t.Errorf("10 seeds never tore a page inside")
	}
}

// Below a sector (a disk that does not write a sector whole), a tear
// keeps or loses each unit of a sector being rewritten on its own: one
// sector can read back part old, part new.
func TestTornPowerLossInsideOneSector(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	for _, unit := range []int{1, 64} {
		per := SectorSize / unit
		tear := func(seed int64) (string, Loss) {
			writeFile(t, p, strings.Repeat("a", pageSize), true)
			syncDir(t, f.Dir())
			// The page's third sector rewritten, not synced.
			next := []byte(strings.Repeat("a", pageSize))
			copy(next[2*SectorSize:3*SectorSize], strings.Repeat("b", SectorSize))
			writeFile(t, p, string(next), false)
			loss := f.Cut(Tear{Unit: unit, Seed: seed})
			return keptUnits(t, readOf(t, p), pageSize, unit, seed), loss
		}
		inside := 0
		for seed := int64(1); seed <= 10; seed++ {
			got, loss := tear(seed)
			sector := got[2*per : 3*per]
			if strings.Contains(got[:2*per]+got[3*per:], "K") {
				t.Errorf("unit %d, seed %d: a unit outside the rewritten sector reads as new: %s", unit, seed, got)
			}
			news := strings.Count(sector, "K")
			if news == 0 || news == per {
				t.Errorf("unit %d, seed %d kept %d of the sector's %d units: a torn power loss keeps some and loses some", unit, seed, news, per)
			}
			if !loss.Torn || loss.Unit != unit || loss.Changes != per || loss.Kept != news {
				t.Errorf("unit %d, seed %d: loss %+v, want torn at %d bytes, %d changes, %d kept", unit, seed, loss, unit, per, news)
			}
			if again, _ := tear(seed); again != got {
				t.Errorf("unit %d, seed %d tore %s, then %s on the same state", unit, seed, got, again)
			}
			if strings.Contains(sector, "K") && strings.Contains(sector, ".") {
				inside++
			}
		}
		if inside == 0 {
			t.Errorf("unit %d: 10 seeds never tore the sector inside", unit)
		}
	}
}

// keptUnits reads a file torn between a's (synced) and b's (not) in
// units of unit bytes: '.' for a unit all old, 'K' for one all new; a unit
// torn inside, or a size other than size, fails the test.
func keptUnits(t *testing.T, got string, size, unit int, seed int64) string {
	t.Helper()
	if len(got) != size {
		t.Fatalf("seed %d: %d bytes after a torn power loss, want %d (the size never changed)", seed, len(got), size)
	}
	var kept []byte
	for i := 0; i < size/unit; i++ {
		switch u := got[i*unit : (i+1)*unit]; u {
		case strings.Repeat("a", unit):
			kept = append(kept, '.')
		case strings.Repeat("b", unit):
			kept = append(kept, 'K')
		default:
			t.Fatalf("seed %d: unit %d (%d bytes) is torn inside: %q...", seed, i, unit, u[:16])
		}
	}
	return string(kept)
}

// A torn power loss with a single un-synced change keeps it (a plain
// power loss drops it); one with nothing un-synced says so.
func TestTornPowerLossKeepsALoneChange(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	writeFile(t, p, strings.Repeat("a", pageSize), true)
	syncDir(t, f.Dir())
	if loss := f.PowerLossTorn(1); loss.Changes != 0 || loss.Kept != 0 {
		t.Fatalf("nothing un-synced, yet the tear decided over %d changes (%d kept)", loss.Changes, loss.Kept)
	}
	rw, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.WriteAt([]byte("b"), 10); err != nil {
		t.Fatal(err)
	}
	_ = rw.Close()
	loss := f.PowerLossTorn(1)
	if got := readOf(t, p); got[10] != 'b' || loss.Changes != 1 || loss.Kept != 1 {
		t.Fatalf("a lone un-synced page: byte 10 is %q after the tear, loss %+v; want it kept", got[10], loss)
	}
}

// A server killed while it used its own mount may be left a zombie that
// waits on it for ever; CleanStale aborts the connection, so the process
// ends and the mount goes.
func TestCleanStaleFreesAServerStuckOnItsOwnMount(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	cmd, line := startChild(t, "mount-busy:"+dir)
	if line != "mounted" {
		t.Fatalf("helper: %q", line)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for alive(cmd.Process.Pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(cmd.Process.Pid) {
		t.Fatal("the killed helper did not die or turn zombie in 10 s")
	}
	if _, err := cleanStale(under(dir)); err != nil {
		t.Fatal(err)
	}
	if inProcMounts(t, dir) {
		t.Fatalf("%s still in /proc/mounts after CleanStale", dir)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed helper was not reaped 30 s after CleanStale: it still waits on its own mount")
	}
}

// under picks the mounts at or below dir: the tests clean only their own
// stale mounts, never those of another run on the machine.
func under(dir string) func(MountInfo) bool {
	return func(m MountInfo) bool { return m.Dir == dir || strings.HasPrefix(m.Dir, dir+"/") }
}

// The kernel caches entries, attributes and pages for a long time
// (cacheTimeout); a power loss changes the file system behind its back,
// so PowerLoss must drop what it made stale. Each part below is cached
// before the power loss and read right after it, with nothing in between
// that would make the kernel ask again: a page written whole (the kernel
// keeps it), a size it learnt by stat, a name it saw exist and one it saw
// missing, a directory it saw renamed, and pages cached under handles
// opened before.
func TestPowerLossLeavesNothingStaleInTheKernel(t *testing.T) {
	f := mount(t)
	dir := f.Dir()
	same, grown, created, gone, held, unnamed := filepath.Join(dir, "same"), filepath.Join(dir, "grown"), filepath.Join(dir, "created"), filepath.Join(dir, "gone"), filepath.Join(dir, "held"), filepath.Join(dir, "unnamed")
	page := func(c byte) string { return strings.Repeat(string(c), pageSize) }
	writeFile(t, same, page('a'), true)
	writeFile(t, grown, "short", true)
	writeFile(t, gone, "durable", true)
	writeFile(t, held, page('h'), true)
	writeFile(t, unnamed, page('u'), true)
	sub := filepath.Join(dir, "d")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(sub, "f"), "in d", true)
	syncDir(t, sub)
	syncDir(t, dir)

	// A page read through a handle opened before, of a file with no name
	// left (removed, durably): no directory leads to it, only the handle.
	buf := make([]byte, pageSize)
	u, err := os.Open(unnamed)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for i := 0; i < 2; i++ {
		if _, err := u.ReadAt(buf, 0); err != nil || string(buf) != page('u') {
			t.Fatalf("before the power loss: read %s: %v", unnamed, err)
		}
	}
	if err := os.Remove(unnamed); err != nil {
		t.Fatal(err)
	}
	syncDir(t, dir)

	// Same size, other data: a whole page the kernel holds up to date.
	// (Read twice: the first read after a write asks for the attributes
	// and reads the page, the second asks for the attributes again,
	// since a read makes the kernel's atime stale, and reads nothing;
	// from then on both are cached.)
	writeFile(t, same, page('b'), false)
	for i := 0; i < 2; i++ {
		if got := readOf(t, same); got != page('b') {
			t.Fatalf("before the power loss %s holds %.8q...", same, got)
		}
	}
	// A size learnt by stat.
	g, err := os.OpenFile(grown, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteString(strings.Repeat("longer", 1000)); err != nil {
		t.Fatal(err)
	}
	g.Close()
	if st, err := os.Stat(grown); err != nil || st.Size() != 6005 {
		t.Fatalf("before the power loss: stat %s: %v, %v", grown, st, err)
	}
	// A name seen to exist, one seen to be missing.
	writeFile(t, created, "never synced", false)
	if _, err := os.Stat(created); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("before the power loss: stat of the removed %s: %v", gone, err)
	}
	// A directory renamed without a directory fsync, its new path and its
	// old one's absence seen.
	moved := filepath.Join(dir, "moved")
	if err := os.Rename(sub, moved); err != nil {
		t.Fatal(err)
	}
	if got := readOf(t, filepath.Join(moved, "f")); got != "in d" {
		t.Fatalf("before the power loss the renamed directory's file holds %q", got)
	}
	if _, err := os.Stat(sub); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("before the power loss: stat of the renamed directory's old path: %v", err)
	}
	// A page read through a handle opened before.
	h, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for i := 0; i < 2; i++ {
		if _, err := h.ReadAt(buf, 0); err != nil || string(buf) != page('h') {
			t.Fatalf("before the power loss: read %s: %v", held, err)
		}
	}

	f.PowerLoss()

	// (A directory listing comes with every entry's attributes: it goes
	// last, or it would refresh what the parts before it test.)
	if _, err := h.ReadAt(buf, 0); !errors.Is(err, syscall.EIO) {
		t.Errorf("right after the power loss a read through a handle opened before: %v, want EIO: the kernel served its cached page", err)
	}
	if _, err := u.ReadAt(buf, 0); !errors.Is(err, syscall.EIO) {
		t.Errorf("right after the power loss a read through a handle opened before, of a file removed durably: %v, want EIO: the kernel served its cached page", err)
	}
	if got := readOf(t, same); got != page('a') {
		t.Errorf("right after the power loss %s holds %.8q... (%d bytes), want the synced page of a: the kernel served its cached page", same, got, len(got))
	}
	// An append before anything asks for the size: the kernel appends at
	// the end it knows, and knew the size from before.
	if g, err = os.OpenFile(grown, os.O_WRONLY|os.O_APPEND, 0); err != nil {
		t.Fatal(err)
	} else if _, err := g.WriteString("+"); err != nil {
		t.Fatal(err)
	}
	g.Close()
	if got := readOf(t, grown); got != "short+" {
		t.Errorf("right after the power loss an O_APPEND write to %s left %q, want %q: the kernel appended at its cached size", grown, got, "short+")
	}
	if st, err := os.Stat(grown); err != nil || st.Size() != int64(len("short+")) {
		t.Errorf("right after the power loss and an append, stat %s: %v (size %d), want 6: the kernel served its cached size", grown, err, sizeOf(st))
	}
	if _, err := os.Stat(created); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("right after the power loss stat of %s, created without a directory fsync: %v, want ENOENT: the kernel served its cached entry", created, err)
	}
	if got := readOf(t, gone); got != "durable" {
		t.Errorf("right after the power loss %s, removed without a directory fsync, holds %q, want it back with %q: the kernel served its cached absence", gone, got, "durable")
	}
	if got := readOf(t, filepath.Join(sub, "f")); got != "in d" {
		t.Errorf("right after the power loss the directory renamed without a directory fsync is not back at its old path: its file reads %q", got)
	}
	if _, err := os.Stat(moved); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("right after the power loss stat of %s, a rename never synced: %v, want ENOENT: the kernel served its cached entry", moved, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"d", "gone", "grown", "held", "same"}; !slices.Equal(names, want) {
		t.Errorf("right after the power loss the directory lists %v, want %v", names, want)
	}
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return -1
	}
	return st.Size()
}

// FilesMade counts the regular files the mount ever held, whether or not
// they survived: a directory is none, and a power loss takes none back.
func TestFilesMadeCountsFilesEverMade(t *testing.T) {
	f := mount(t)
	if err := os.Mkdir(filepath.Join(f.Dir(), "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if n := f.FilesMade(); n != 0 {
		t.Fatalf("a directory only: FilesMade %d, want 0", n)
	}
	writeFile(t, filepath.Join(f.Dir(), "d", "a"), "x", false)
	f.PowerLoss()
	if n := f.FilesMade(); n != 1 {
		t.Fatalf("one file made, then lost to a power loss: FilesMade %d, want 1", n)
	}
}

// A page written again with the bytes it held, and zeros written over a
// hole (a database extending a file), change nothing: a torn power loss
// has nothing of theirs to decide over, at pages or at sectors. Before,
// each counted as a change, and a tear over such pages alone passed for
// one that tore something.
func TestTornPowerLossIgnoresWritesThatChangeNothing(t *testing.T) {
	f := mount(t)
	p := filepath.Join(f.Dir(), "a")
	for _, unit := range []int{PageSize, SectorSize} {
		writeFile(t, p, strings.Repeat("a", pageSize), true)
		if err := os.Truncate(p, 3*pageSize); err != nil { // a hole of two pages
			t.Fatal(err)
		}
		rw, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		rw.Sync()
		syncDir(t, f.Dir())
		rw.WriteAt([]byte(strings.Repeat("a", pageSize)), 0)     // the same bytes again
		rw.WriteAt(make([]byte, pageSize), pageSize)             // zeros over the hole
		rw.WriteAt([]byte(strings.Repeat("b", 100)), 2*pageSize) // one real change
		rw.Close()
		loss := f.Cut(Tear{Unit: unit, Seed: 1})
		if loss.Changes != 1 || loss.Kept != 1 {
			t.Errorf("tear at %d bytes: %d changes (%d kept), want 1: the rewrites that changed nothing counted", unit, loss.Changes, loss.Kept)
		}
		if got := readOf(t, p); len(got) != 3*pageSize || got[2*pageSize] != 'b' {
			t.Errorf("tear at %d bytes: the lone real change was not kept", unit)
		}
	}
}

// OnDurable hears every fsync, fdatasync, rename, link and unlink, with
// the calling process and the file, a synchronous write as the sync that
// follows it, and nothing else (plain writes, creates, reads); it stops
// when told nil.
func TestOnDurableReportsEachDurableOperation(t *testing.T) {
	f := mount(t)
	var mu sync.Mutex
	var got []string
	f.OnDurable(func(d DurableOp) {
		mu.Lock()
		defer mu.Unlock()
		// The caller is a thread (the kernel's task) of this process.
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", d.Pid)); err != nil {
			t.Errorf("%s by task %d, not a thread of this process: %v", d, d.Pid, err)
		}
		got = append(got, d.String())
	})
	if err := os.Mkdir(filepath.Join(f.Dir(), "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(f.Dir(), "d", "a")
	writeFile(t, a, "x", true)
	fh, err := os.OpenFile(a, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fdatasync(int(fh.Fd())); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	syncDir(t, filepath.Join(f.Dir(), "d"))
	b := filepath.Join(f.Dir(), "b")
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(b, filepath.Join(f.Dir(), "c")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	// A write through an O_SYNC or O_DSYNC handle: the kernel follows it
	// with an fsync (or fdatasync) of the file.
	for _, fl := range []int{syscall.O_SYNC, syscall.O_DSYNC} {
		s, err := os.OpenFile(filepath.Join(f.Dir(), "c"), os.O_WRONLY|fl, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.WriteString("z"); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	f.OnDurable(nil)
	writeFile(t, filepath.Join(f.Dir(), "c"), "y", true)
	want := []string{"fsync d/a", "fdatasync d/a", "fsync d", "rename b", "link c", "unlink b", "fsync c", "fdatasync c"}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("durable operations heard:\n got %q\nwant %q", got, want)
	}
}

// From the instant the power goes (PowerOff, which a durable-step power
// cut calls right after the step) nothing a process still alive does
// reaches the file system: its writes, syncs, renames, new names and
// removals fail with EIO, so a sync after the instant makes nothing
// durable; reads go on; the power loss then keeps what was synced before
// the instant and brings the power back.
func TestPowerOffRefusesEveryChangeUntilThePowerLoss(t *testing.T) {
	f := mount(t)
	p, q := filepath.Join(f.Dir(), "a"), filepath.Join(f.Dir(), "b")
	h := openSynced(t, f, p, "synced before")
	if _, err := h.WriteAt([]byte("un-synced"), 0); err != nil {
		t.Fatal(err)
	}
	f.PowerOff()
	changes := map[string]func() error{
		"write":    func() error { _, err := h.WriteAt([]byte("after"), 0); return err },
		"fsync":    h.Sync,
		"truncate": func() error { return h.Truncate(1) },
		"create":   func() error { return os.WriteFile(q, []byte("x"), 0o644) },
		"mkdir":    func() error { return os.Mkdir(q, 0o755) },
		"rename":   func() error { return os.Rename(p, q) },
		"link":     func() error { return os.Link(p, q) },
		"unlink":   func() error { return os.Remove(p) },
		"chmod":    func() error { return os.Chmod(p, 0o600) },
	}
	for name, change := range changes {
		if err := change(); !errors.Is(err, syscall.EIO) {
			t.Errorf("%s with the power off: %v, want EIO", name, err)
		}
	}
	if got := readOf(t, p); got != "un-syncedfore" {
		t.Errorf("a read with the power off: %q, want what the live file holds", got)
	}
	f.Cut(Tear{})
	if got := readOf(t, p); got != "synced before" {
		t.Errorf("after the power loss: %q, want what was synced before the power went", got)
	}
	writeFile(t, q, "power back", true)
	if got := readOf(t, q); got != "power back" {
		t.Errorf("after the power loss the power is back: %q", got)
	}
}
