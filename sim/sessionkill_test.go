package sim

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/procstat"
	"github.com/crashmatrix/crashmatrix/sim/execmode"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// A process the supervisor started and handed to a worker (a store spare)
// is outside the worker's session; the backend that handed it over says
// so (Adopter), and the supervisor treats it as the session's: killing
// the session ends it, and the durable-step watch and the sync diagnosis
// count it as the worker's.
func TestAdoptedProcessesBelongToTheWorkersSession(t *testing.T) {
	spare := exec.Command("sleep", "600")
	spare.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := spare.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spare.Process.Kill(); _ = spare.Wait() })
	const session = 1 << 30 // a session id no process has
	var killed []int
	// Registered for the rest of the test binary: it answers for that
	// session only, which no other test kills or asks about.
	RegisterAdopter(Adopter{
		Kill: func(sid int) {
			if sid == session {
				killed = append(killed, sid)
				_ = syscall.Kill(-spare.Process.Pid, syscall.SIGKILL)
			}
		},
		SessionOf: func(pgid int) int {
			if pgid == spare.Process.Pid {
				return session
			}
			return 0
		},
	})
	st, err := procstat.Read(spare.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if st.Session == session || !worker.InSession(st, session) {
		t.Errorf("the adopted process (session %d) is not counted in the worker's session %d", st.Session, session)
	}
	self, err := procstat.Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if worker.InSession(self, session) {
		t.Error("a process nobody adopted is counted in the worker's session")
	}
	execmode.KillSession(session, true)
	if !slices.Equal(killed, []int{session}) {
		t.Fatalf("killSession told the adopters %v, want [%d]", killed, session)
	}
	if err := spare.Wait(); err == nil || spare.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the adopted process ended with %v, want SIGKILL", err)
	}
}
