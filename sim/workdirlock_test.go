package sim_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/procstat"
	"github.com/crashmatrix/crashmatrix/sim"
)

// Two runs in one work folder overwrote each other's cases and both ended
// NOT CERTIFIED against the reference: the second is refused, naming the
// first, until the first gives the folder up.
func TestWorkDirLockRefusesASecondRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work")
	first, err := sim.LockWorkDir(dir, "certify --point x")
	if err != nil {
		t.Fatal(err)
	}
	if first.Stale != nil {
		t.Fatalf("a new folder has a stale owner: %v", first.Stale)
	}
	_, err = sim.LockWorkDir(dir, "certify")
	var busy *sim.WorkDirBusyError
	if !errors.As(err, &busy) {
		t.Fatalf("second lock: %v, want a WorkDirBusyError", err)
	}
	if busy.Owner.PID != os.Getpid() || busy.Owner.Command != "certify --point x" || busy.Owner.Since.IsZero() {
		t.Fatalf("owner %+v, want this process, its command and when it took the folder", busy.Owner)
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("in use by another crashmatrix run (PID %d, started ", os.Getpid())) || !strings.Contains(msg, "give another --workdir") {
		t.Fatalf("message %q names neither the run nor what to do", msg)
	}
	first.Release()
	first.Release() // twice is harmless
	if _, err := os.Stat(filepath.Join(dir, sim.WorkDirLockFile)); !os.IsNotExist(err) {
		t.Fatalf("the lock file outlived its release: %v", err)
	}
	again, err := sim.LockWorkDir(dir, "certify")
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	if again.Stale != nil {
		t.Fatalf("a released folder has a stale owner: %v", again.Stale)
	}
	again.Release()
}

// A run killed with SIGKILL gives nothing up, but the kernel drops its
// flock: its lock file, naming a process that is gone (or a PID now
// reused, with another start time), is taken over and reported.
func TestWorkDirLockTakesOverAKilledRunsLock(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	self, err := procstat.Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, owner := range []sim.LockOwner{{PID: gone.Process.Pid, Start: 1}, {PID: os.Getpid(), Start: self.Start + 1}} {
		if owner.Alive() {
			t.Fatalf("%+v: Alive, want a dead process or a reused PID", owner)
		}
		dir := t.TempDir()
		stale := fmt.Sprintf("pid %d\nstart %d\nsince 2026-01-02T03:04:05Z\ncommand certify\n", owner.PID, owner.Start)
		if err := os.WriteFile(filepath.Join(dir, sim.WorkDirLockFile), []byte(stale), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := sim.LockWorkDir(dir, "run --library")
		if err != nil {
			t.Fatalf("a killed run's lock (%+v): %v", owner, err)
		}
		if l.Stale == nil || l.Stale.PID != owner.PID || l.Stale.Command != "certify" {
			t.Fatalf("Stale = %+v, want the killed run %+v", l.Stale, owner)
		}
		_, err = sim.LockWorkDir(dir, "certify")
		var busy *sim.WorkDirBusyError
		if !errors.As(err, &busy) || busy.Owner.PID != os.Getpid() || busy.Owner.Command != "run --library" {
			t.Fatalf("after the takeover: %v, want the folder held by this run", err)
		}
		l.Release()
	}
	if !(sim.LockOwner{PID: os.Getpid(), Start: self.Start}).Alive() {
		t.Fatal("this process is not Alive")
	}
}
