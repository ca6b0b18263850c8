package execmode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// Launcher starts worker processes.
type Launcher interface {
	// Command returns the command that runs one worker from a spec file.
	Command(ctx context.Context, specPath string) *exec.Cmd
}

// BinaryLauncher runs `<Path> worker --spec FILE` (the crashmatrix binary).
// When the slim worker binary of Backend (WorkerBinary) built no earlier
// than Path lies next to it (make build puts them all in bin/), it is
// started instead: the same worker linking only its backend, without the
// CLI, the other backends' drivers and the container libraries, cheaper to
// start thousands of times. NewRunner sets Backend to the run's backend
// when it is empty.
type BinaryLauncher struct {
	Path    string
	Backend string
}

// Command implements Launcher.
func (b BinaryLauncher) Command(ctx context.Context, spec string) *exec.Cmd {
	bin, args := b.worker()
	return b.withRuntimeEnv(exec.Command(bin, append(args, "--spec", spec)...))
}

// withRuntimeEnv gives cmd the Go runtime settings of the backend's
// worker processes (worker.WorkerRuntimeEnv), if it has any.
func (b BinaryLauncher) withRuntimeEnv(cmd *exec.Cmd) *exec.Cmd {
	env := os.Environ()
	if extra := worker.WorkerRuntimeEnv(b.Backend, env); len(extra) > 0 {
		cmd.Env = append(env, extra...)
	}
	return cmd
}

// FloorCommand starts the binary Command starts, as Command starts it,
// told to exit as soon as it has started (--floor): the cost of a worker
// process that does nothing, which bench reports next to an empty Go
// binary's.
func (b BinaryLauncher) FloorCommand() *exec.Cmd {
	bin, args := b.worker()
	return b.withRuntimeEnv(exec.Command(bin, append(args, "--floor")...))
}

// worker returns the binary a worker runs from and the arguments before
// its own.
func (b BinaryLauncher) worker() (string, []string) {
	if name := worker.WorkerBinary(b.Backend); name != "" {
		if w := filepath.Join(filepath.Dir(b.Path), name); w != b.Path {
			st, err := os.Stat(w)
			self, serr := os.Stat(b.Path)
			// Only a worker built with (after) this binary: a stale one
			// would run yesterday's protocol.
			if err == nil && serr == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 && !st.ModTime().Before(self.ModTime()) {
				return w, nil
			}
		}
	}
	return b.Path, []string{"worker"}
}

// WorkerSpecEnv is the environment variable through which a re-executed
// binary learns it is a worker (and where its spec is).
const WorkerSpecEnv = "CRASHMATRIX_WORKER_SPEC"

// ReexecLauncher re-executes a Go test binary running only the tests Test
// (a -test.run pattern) matches;
// the test sees WorkerSpecEnv and acts as a worker. The worker runs with
// no go test timeout (-test.timeout=0): the supervisor's deadline ends a
// worker that hangs, with its stacks and the point it hung at, never go
// test's "test timed out" panic, which would end it earlier than the
// deadline the run chose and say nothing of where.
type ReexecLauncher struct {
	Binary string
	Test   string
}

// Command implements Launcher.
func (r ReexecLauncher) Command(ctx context.Context, spec string) *exec.Cmd {
	cmd := exec.Command(r.Binary, "-test.run="+r.Test, "-test.count=1", "-test.timeout=0")
	cmd.Env = append(os.Environ(), WorkerSpecEnv+"="+spec)
	return cmd
}

func filterEnv(env []string, key string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, key+"=") {
			out = append(out, e)
		}
	}
	return out
}
