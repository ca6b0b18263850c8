package execmode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A worker hung in a store call names the store method the reference
// called, a third-party one (outside this module) included, beside the
// reference frame; a goroutine outside any store call names none.
func TestStuckNamesTheStoreMethod(t *testing.T) {
	dump := `goroutine 1 [running]:
main.main()
	/x/main.go:1 +0x1

goroutine 7 [select, 2 minutes]:
runtime.gopark(0x0)
	/usr/lib/go/src/runtime/proc.go:435 +0xce
time.Sleep(0x989680)
	/usr/lib/go/src/runtime/time.go:338 +0x165
example.com/acme/store/internal/wire.(*Conn).roundTrip(0xc000)
	/src/acme/store/internal/wire/conn.go:88 +0x45
example.com/acme/store.(*Registry).FindMatches(0xc000, {0x1, 0x2})
	/src/acme/store/registry.go:41 +0x5a
github.com/crashmatrix/crashmatrix/reference.(*Service).matchEntities(0xc000)
	/src/crashmatrix/reference/plan.go:120 +0x99
github.com/crashmatrix/crashmatrix/reference.(*Service).Ingest(0xc000)
	/src/crashmatrix/reference/service.go:200 +0x99
github.com/crashmatrix/crashmatrix/sim/worker.(*worker).run(0xc000)
	/src/crashmatrix/sim/worker/worker.go:230 +0x99

goroutine 9 [IO wait]:
internal/poll.runtime_pollWait(0x0)
	/usr/lib/go/src/runtime/netpoll.go:351 +0x85
example.com/acme/store.(*pool).keepAlive(0xc000)
	/src/acme/store/pool.go:12 +0x5a
`
	path := filepath.Join(t.TempDir(), "worker.out")
	if err := os.WriteFile(path, []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	got := stuckFrames(path)
	want := "select, 2 minutes: store method example.com/acme/store.(*Registry).FindMatches (registry.go:41) called from reference.(*Service).matchEntities (plan.go:120)"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("stuck = %q\nwant [%q]", got, want)
	}
}

// A worker whose deadline passed while it waited in an fsync (SQLite's,
// through modernc's libc) is stuck on the disk, not in the store's logic:
// stuckFrames says so (the supervisor's note then names the disk). The
// dump is trimmed from a real one (a 2-core machine with its disk busy).
func TestStuckInFsyncIsNamed(t *testing.T) {
	dump := `goroutine 1 gp=0xb9405e01e0 m=0 mp=0x14f6520 [syscall]:
syscall.Syscall6(0x4a, 0x9, 0x0, 0x0, 0x0, 0x0, 0x0)
	/usr/local/go/src/syscall/syscall_linux.go:96 +0x39 fp=0xb9407920c0 sp=0xb940792060 pc=0x4a5fb9
modernc.org/libc.___syscall_cp(0x24398?, 0x7f789bf30028?)
	/root/go/pkg/mod/modernc.org/libc@v1.80.1/syscall_musl.go:25 +0xc5 fp=0xb9407921a0 sp=0xb940792108 pc=0x7b7225
modernc.org/libc.Xfsync(0xb94067e370, 0x4061b400?)
	/root/go/pkg/mod/modernc.org/libc@v1.80.1/ccgo_linux_amd64.go:149736 +0x2e fp=0xb9407921f0 sp=0xb9407921a0 pc=0x7b280e
modernc.org/sqlite/lib._unixSync(0xb94067e370, 0x7f789bfd06e0, 0x2)
	/root/go/pkg/mod/modernc.org/sqlite@v1.62.0/lib/sqlite_g_000000000003fffc.go:295 +0x25 fp=0xb940792210 sp=0xb9407921f0 pc=0x951fa5
github.com/crashmatrix/crashmatrix/adapters/sqlite.(*cachingConn).ExecContext(0x7f789bf99e86?, {0xdce498, 0xb94078c690})
	/work/main/adapters/sqlite/stmtcache.go:204 +0xe5 fp=0xb9406a1b30 sp=0xb9406a1ab8 pc=0x9b5905
github.com/crashmatrix/crashmatrix/adapters/internal/sqlcore.(*Operations).CompareAndSet(0xc000)
	/work/main/adapters/internal/sqlcore/operations.go:147 +0x99
github.com/crashmatrix/crashmatrix/reference.(*Service).advance(0xc000)
	/work/main/reference/execute.go:300 +0x99

goroutine 7 [select]:
database/sql.(*DB).connectionOpener(0xcb07a5b35f0, {0xdce4d0, 0xcb07a5b4f00})
	/usr/local/go/src/database/sql/sql.go:1261 +0x89
`
	path := filepath.Join(t.TempDir(), "worker.out")
	if err := os.WriteFile(path, []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	got := stuckFrames(path)
	if len(got) != 1 || !strings.HasPrefix(got[0], SyncStall+": ") || !strings.Contains(got[0], "sqlcore.(*Operations).CompareAndSet") {
		t.Fatalf("stuck = %q, want one entry in %q naming the store method", got, SyncStall)
	}
	// The same stack without the sync call is an ordinary syscall.
	plain := strings.NewReplacer("Syscall6(0x4a,", "Syscall6(0x0,", "Xfsync", "Xread").Replace(dump)
	if err := os.WriteFile(path, []byte(plain), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := stuckFrames(path); len(got) != 1 || !strings.HasPrefix(got[0], "syscall: ") {
		t.Fatalf("without the fsync: stuck = %q, want the goroutine's own state", got)
	}
}

// At a worker's deadline the supervisor looks for processes of the
// worker's group (its store processes) blocked in an fsync: it reads
// their group from /proc/PID/stat (internal/procstat) and the system call
// from /proc/PID/syscall.
func TestSessionInSyncReadsProc(t *testing.T) {
	// crashmatrix is Linux only (process groups, FUSE): /proc and the
	// fsync numbers of the architecture it runs on are always there.
	if _, err := os.Stat("/proc/self/syscall"); err != nil {
		t.Fatalf("no /proc/self/syscall: %v", err)
	}
	if syncSyscalls == [2]int{} {
		t.Fatalf("no fsync numbers for %s: add them to syncSyscalls", runtime.GOARCH)
	}
	if runtime.GOARCH == "amd64" && (syncSyscalls != [2]int{74, 75} || !inSync([]string{"goroutine 1 [syscall]:", "syscall.Syscall6(0x4b, 0x3, 0x0)", "x.go:1"})) {
		t.Fatalf("amd64: fsync numbers %v, a raw fdatasync (0x4b) frame not seen as a sync", syncSyscalls)
	}
	for _, n := range syncSyscalls {
		if !inSyncSyscall(fmt.Sprintf("%d 0x9 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x4a5fb9", n)) {
			t.Errorf("system call %d (fsync or fdatasync) not seen as a sync", n)
		}
	}
	for _, sc := range []string{"0 0x0 0x1", "running", "", "-1 0x7ffd 0x4a5fb9"} {
		if inSyncSyscall(sc) {
			t.Errorf("%q seen as a sync", sc)
		}
	}
	// A session whose other member sleeps: nothing named.
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }()
	time.Sleep(200 * time.Millisecond)
	if got := sessionInSync(cmd.Process.Pid); len(got) != 0 {
		t.Fatalf("a sleeping session named as in a sync: %q", got)
	}
}
