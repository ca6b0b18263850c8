package storeproc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/internal/procstat"
	"github.com/crashmatrix/crashmatrix/reference"
)

// spareWorkerEnv turns the test binary into a stand-in worker: it opens
// the store of $spareWorkerCmd with Options.Spare on $spareWorkerEnv (its
// data directory), creates an operation, prints the store process's pid
// and waits to be killed.
const (
	spareWorkerEnv = "CRASHMATRIX_TEST_SPARE_WORKER_DIR"
	spareWorkerCmd = "CRASHMATRIX_TEST_SPARE_WORKER_CMD"
	// spareWorkerTmp is the store processes' TMPDIR, one for the test's
	// workers as a run has one for its cases (CaseEnv.TempDir).
	spareWorkerTmp = "CRASHMATRIX_TEST_SPARE_WORKER_TMP"
	// spareWorkerClose: the stand-in closes its client and exits instead.
	spareWorkerClose = "CRASHMATRIX_TEST_SPARE_WORKER_CLOSE"
)

func TestMain(m *testing.M) {
	if os.Getenv(echoStoreEnv) != "" {
		os.Exit(echoStore())
	}
	if dir := os.Getenv(spareWorkerEnv); dir != "" {
		os.Exit(spareWorker(dir, os.Getenv(spareWorkerTmp), os.Getenv(spareWorkerCmd)))
	}
	os.Exit(m.Run())
}

func spareWorker(dir, tmp, command string) int {
	c, err := storeproc.Start(context.Background(), storeproc.Options{Command: command, Dir: dir, TempDir: tmp, Namespace: "w", Spare: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if _, err := c.Stores().Ops.Get(context.Background(), "op-1"); !errors.Is(err, reference.ErrNotFound) {
		fmt.Fprintln(os.Stderr, "get of an operation never created:", err)
		return 2
	}
	fmt.Printf("store %d\n", c.StorePID())
	if os.Getenv(spareWorkerClose) != "" {
		// A worker that ends without a crash: it closes its stores, and
		// ends what it left running (crashmatrix's main does, when a
		// worker runs as "crashmatrix worker"): not the spare it gave back.
		_ = c.Close()
		storeproc.KillAll()
		return 0
	}
	select {}
}

// startSpareWorker starts the stand-in worker as the supervisor starts a
// worker (our child, leading a session) and returns it with the pid of
// the store process it talks to.
func startSpareWorker(t *testing.T, command, dir string, env ...string) (*exec.Cmd, int) {
	t.Helper()
	// A case's data directory does not exist before its stores open.
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("the worker's data directory %s exists already", dir)
	}
	w := exec.Command(os.Args[0], "-test.run=^$")
	tmp := filepath.Join(filepath.Dir(filepath.Dir(dir)), "store-tmp")
	w.Env = append(append(os.Environ(), spareWorkerEnv+"="+dir, spareWorkerTmp+"="+tmp, spareWorkerCmd+"="+command), env...)
	w.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	w.Stderr = os.Stderr
	out, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-w.Process.Pid, syscall.SIGKILL); _ = w.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "store "))
	if err != nil || perr != nil {
		t.Fatalf("the worker said %q (%v)", line, err)
	}
	return w, pid
}

// A worker takes a store process its supervisor started ahead of need
// (one that answered hello already), greets it with its own case's hello
// and gets its case served; a SIGKILL of the worker, then the
// supervisor's end of its session (KillAdopted), kills it. Before the
// spares, every worker started its own store process (its parent).
func TestSpareIsTakenAndDiesWithItsWorker(t *testing.T) {
	command := python(t, "sqlite_store.py")
	sp, err := storeproc.NewSpares(1, "", command)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()

	// The first worker finds none ready: it starts its own, and its
	// request starts spares.
	first, store := startSpareWorker(t, command, caseDir(t))
	if st, err := procstat.Read(store); err != nil || st.PPID != first.Process.Pid {
		t.Fatalf("the first worker's store process %d: %+v %v; want its own child (no spare was ready)", store, st, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for sp.ReadyCount() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no spare got ready in 60s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if first.ProcessState != nil {
		t.Fatal("the first worker ended")
	}

	dir := caseDir(t)
	w, store := startSpareWorker(t, command, dir)
	st, err := procstat.Read(store)
	if err != nil || st.PPID != os.Getpid() || st.Session == w.Process.Pid {
		t.Fatalf("the second worker's store process %d: %+v %v; want the spare this process started", store, st, err)
	}
	if started, handed, _ := sp.Counts(); handed != 1 || started < 1 {
		t.Errorf("spares started %d, handed %d; want one handed", started, handed)
	}
	// It served the worker's case: its files are in the worker's dir.
	if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
		t.Errorf("the worker's data directory after a create: %v %v; want the store's files", ents, err)
	}
	if storeproc.AdoptedBy(store) != w.Process.Pid {
		t.Errorf("AdoptedBy(%d) = %d, want the worker's session %d", store, storeproc.AdoptedBy(store), w.Process.Pid)
	}
	adopted, ended := storeproc.AdoptedProcs(w.Process.Pid)
	if len(adopted) != 1 || adopted[0] != store {
		t.Fatalf("adopted by the worker: %v, want its store %d", adopted, store)
	}

	// The supervisor's side of a kill: SIGKILL, then, once the worker has
	// exited and before it is reaped, the end of its session.
	if err := syscall.Kill(w.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExitedNoReap(w.Process.Pid)
	storeproc.KillAdopted(w.Process.Pid)
	how := ended()[0]
	var ee *exec.ExitError
	switch {
	case how.Running:
		t.Fatal("KillAdopted returned with the worker's store process still running")
	case how.Err == nil:
		// The worker's death closed the store's stdin, and the store
		// exited on that end of input before the kill reached it: it
		// ended with its worker all the same.
		t.Log("the store process exited on end of input before the kill")
	case !errors.As(how.Err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL:
		t.Errorf("the store process ended with %v, want killed (SIGKILL) with its worker", how.Err)
	}
	if storeproc.AdoptedBy(store) != 0 {
		t.Errorf("AdoptedBy(%d) after the kill = %d, want 0", store, storeproc.AdoptedBy(store))
	}
}

// A worker that ends without a crash gives its spare back, closed (its
// store let go of the case's data): the next worker takes the same
// process, and its hello opens that worker's own folder.
func TestSpareIsGivenBackByAWorkerThatEnds(t *testing.T) {
	command := python(t, "sqlite_store.py")
	sp, err := storeproc.NewSpares(1, "", command)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	// A first worker starts its own (none is ready) and makes the
	// supervisor start spares.
	startSpareWorker(t, command, caseDir(t))
	deadline := time.Now().Add(60 * time.Second)
	for sp.ReadyCount() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	first, store := startSpareWorker(t, command, caseDir(t), spareWorkerClose+"=1")
	if err := first.Wait(); err != nil {
		t.Fatalf("the first worker: %v", err)
	}
	// Given back, the process waits among the ready ones for the next.
	for sp.ReadyCount() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st, err := procstat.Read(store); err != nil || st.Gone() || st.PPID != os.Getpid() {
		t.Fatalf("the spare %d after its worker closed it: %+v %v; want it running, ours", store, st, err)
	}
	dir := caseDir(t)
	_, again := startSpareWorker(t, command, dir)
	if again != store {
		t.Errorf("the second worker talks to store process %d, want %d, the one the first gave back", again, store)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
		t.Errorf("the second worker's data directory: %v %v; want the store's files", ents, err)
	}
	if _, handed, returned := sp.Counts(); handed != 2 || returned != 1 {
		t.Errorf("spares handed %d, given back %d; want 2 and 1", handed, returned)
	}
}

// A store that does not declare reopen gets no spares (a spare is greeted
// once before its worker's hello): its workers start their own, and the
// supervisor stops trying after a few.
func TestNoSparesOfAStoreWithoutReopen(t *testing.T) {
	command := python(t, "sqlite_store.py", "--no-reopen")
	sp, err := storeproc.NewSpares(1, "", command)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	for i := range 2 {
		w, store := startSpareWorker(t, command, caseDir(t))
		if st, err := procstat.Read(store); err != nil || st.PPID != w.Process.Pid {
			t.Fatalf("worker %d's store process %d: %+v %v; want its own child", i+1, store, st, err)
		}
	}
	if _, handed, _ := sp.Counts(); handed != 0 {
		t.Errorf("spares handed %d, want none", handed)
	}
}

// A process that is no worker of ours (not our child leading a session)
// gets no spare: here this process asks its own service.
func TestSparesRefuseAStranger(t *testing.T) {
	command := python(t, "sqlite_store.py")
	sp, err := storeproc.NewSpares(1, "", command)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if storeproc.AskOwnService(command, t.TempDir()) {
		t.Fatal("a process that is not our worker got a spare")
	}
	if n := sp.Pending(); n != 0 {
		t.Errorf("a stranger's request started %d spares", n)
	}
}

// caseDir is a data directory not made yet, as a case's is before its
// first store opens.
func caseDir(t *testing.T) string { return filepath.Join(t.TempDir(), "data") }

// waitExitedNoReap waits until child pid has exited, leaving it unreaped
// (as the supervisor does before it ends the worker's session).
func waitExitedNoReap(pid int) {
	for {
		st, err := procstat.Read(pid)
		if err != nil || st.Gone() {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
