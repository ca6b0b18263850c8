package sim

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/internal/procstat"
	"github.com/crashmatrix/crashmatrix/sim/execmode"
)

// A worker leads a session; a store process it starts leads a group of its
// own in it (storeproc), and may start children there. Killing the worker
// (at a window, at its deadline, on Ctrl-C) kills the whole session: no
// store process, nor a child of one, outlives it.
func TestKillSessionEndsTheStoreGroupsOfAWorker(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	// The "worker": a session leader whose child (a job of bash's job
	// control, set -m) leads a group of its own and starts a grandchild.
	worker := exec.Command("bash", "-c", `set -m; sh -c 'sleep 600 & echo $! >> "$0"; exec sleep 600' "$0" & echo $! >> "$0"; wait`, pids)
	worker.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	var started []int
	for deadline := time.Now().Add(5 * time.Second); len(started) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(pids)
		started = nil
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				started = append(started, pid)
			}
		}
	}
	t.Cleanup(func() {
		for _, pid := range started {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if len(started) < 2 {
		t.Fatalf("the worker's processes did not start: %v", started)
	}
	otherGroup := false
	for _, pid := range started {
		st, err := procstat.Read(pid)
		if err != nil || st.Session != worker.Process.Pid {
			t.Fatalf("process %d is not in the worker's session: %+v %v", pid, st, err)
		}
		otherGroup = otherGroup || st.PGRP != worker.Process.Pid
	}
	if !otherGroup {
		t.Fatal("no process of the worker leads a group of its own: the test shows nothing a group kill would miss")
	}
	execmode.KillSession(worker.Process.Pid, true)
	_ = worker.Wait()
	for _, pid := range started {
		ended := false
		for deadline := time.Now().Add(2 * time.Second); !ended && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			st, err := procstat.Read(pid)
			ended = err != nil || st.Gone()
		}
		if !ended {
			t.Errorf("process %d of the worker's session outlived killSession", pid)
		}
	}
}
