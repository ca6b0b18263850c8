package provision

import (
	"os/exec"
	"testing"
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
		got := pgBackgroundProc(uint32(cmd.Process.Pid))
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if got != want {
			t.Errorf("%q: background %v, want %v", title, got, want)
		}
	}
}
