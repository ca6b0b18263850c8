package procstat

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseCountsFieldsFromTheLastParenthesis(t *testing.T) {
	// A command name with spaces and parentheses, as a store process may
	// name itself.
	line := "4242 (node (store) x) S 4000 4001 4002 0 -1 4194560 166 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10 1 2 3\n"
	s, err := Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PID: 4242, Comm: "node (store) x", State: 'S', PPID: 4000, PGRP: 4001, Session: 4002, Start: 987654}
	if s != want {
		t.Fatalf("Parse = %+v, want %+v", s, want)
	}
	if s.Gone() {
		t.Fatal("a sleeping process is Gone")
	}
	for _, st := range []string{"Z", "X"} {
		z, err := Parse(strings.Replace(line, ") S ", ") "+st+" ", 1))
		if err != nil || !z.Gone() {
			t.Fatalf("state %s: Gone = %v (%v), want true", st, z.Gone(), err)
		}
	}
}

func TestParseRefusesWhatIsNotAStatLine(t *testing.T) {
	for _, bad := range []string{"", "4242 node S 1 2 3", "4242 (x) S 1 2", "x (y) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 5", "1 (y) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 start"} {
		if s, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", bad, s)
		}
	}
}

func TestReadThisProcessAndAChild(t *testing.T) {
	self, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.PID != os.Getpid() || self.PPID != os.Getppid() || self.PGRP != syscall.Getpgrp() || self.Session != sid() || self.Start == 0 {
		t.Fatalf("Read(self) = %+v; pid %d ppid %d pgrp %d", self, os.Getpid(), os.Getppid(), syscall.Getpgrp())
	}
	// A child that exited and was not waited for is a zombie: Gone, and
	// its start time is not before ours.
	c := exec.Command("true")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var st Stat
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, err = Read(c.Process.Pid); err != nil {
			t.Fatal(err)
		}
		if st.Gone() || time.Now().After(deadline) {
			break
		}
	}
	if !st.Gone() || st.PPID != os.Getpid() || st.Start < self.Start {
		t.Fatalf("exited child: %+v, want a zombie of ours started after %d", st, self.Start)
	}
	_ = c.Wait()
	if _, err := Read(c.Process.Pid); !os.IsNotExist(err) {
		t.Fatalf("Read of a reaped child: %v, want not exist", err)
	}
}

// sid is this process's session id.
func sid() int {
	s, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0)
	return int(s)
}
