package provision

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A process titled as PostgreSQL titles its WAL writer is a background
// process, whose durable steps no store call takes; one titled as a
// client backend (user, database, client address) is not; nor is a
// process that is not PostgreSQL's.
func TestPgBackgroundProc(t *testing.T) {
	background := map[string]bool{
		"postgres: walwriter   ":                                    true,
		"postgres: checkpointer ":                                   true,
		"postgres: autovacuum launcher ":                            true,
		"postgres: crashmatrix crashmatrix 10.88.0.1(43210) COMMIT": false,
		"java": false,
	}
	for title, want := range background {
		cmd := exec.Command("sleep", "30")
		cmd.Args[0] = title
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		execed(t, cmd.Process.Pid, title)
		got := pgBackgroundProc(uint32(cmd.Process.Pid))
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if got != want {
			t.Errorf("%q: background %v, want %v", title, got, want)
		}
	}
}

// execed waits until process pid runs under title: right after Start,
// /proc/pid/cmdline can still be the forked test binary's, before its
// exec (the test failed so, now and then, on a loaded machine).
func execed(t *testing.T, pid int, title string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.HasPrefix(string(b), title+"\x00") {
			return
		}
	}
	t.Fatalf("process %d did not run as %q within 10 s", pid, title)
}
