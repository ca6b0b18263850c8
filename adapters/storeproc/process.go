package storeproc

import (
	"context"
	"time"
)

// ProcessOptions start a child process that speaks newline-delimited JSON
// over its stdin and stdout as a store does (another protocol's process:
// the service protocol's), with the same life: its own process group,
// killed whole when it ends, dying with its parent; stderr kept (its tail)
// and logged in full to LogDir/<LogName>-<pid>.log.
type ProcessOptions struct {
	Command, WorkDir, Dir, LogDir, TempDir string
	// LogName prefixes the log file ("store" when empty).
	LogName string
	// Env are KEY=VALUE variables set besides $CRASHMATRIX_STORE_DIR and
	// $TMPDIR.
	Env []string
}

// Process is one such child process. Its methods are not safe for
// concurrent use: one conversation at a time.
type Process struct{ p *proc }

// StartProcess starts the process; what it says first is the caller's.
func StartProcess(o ProcessOptions) (*Process, error) {
	p, err := start(&Options{Command: o.Command, WorkDir: o.WorkDir, Dir: o.Dir, LogDir: o.LogDir, TempDir: o.TempDir, logName: o.LogName, extraEnv: o.Env})
	if err != nil {
		return nil, err
	}
	return &Process{p}, nil
}

// Send writes v as one line.
func (x *Process) Send(v any) error { return x.p.send(v) }

// Next waits up to d for the next line: the line, or timedOut, or the
// reason stdout ended (ended), or the context's error.
func (x *Process) Next(ctx context.Context, d time.Duration) (line []byte, timedOut bool, ended, err error) {
	ev, timedOut, err := x.p.next(ctx, d)
	return ev.line, timedOut, ev.end, err
}

// Kill kills the process's group at once and waits (briefly) until it is
// gone.
func (x *Process) Kill() { x.p.kill() }

// Stop closes stdin and gives the process 5 s to exit before killing it.
func (x *Process) Stop() { x.p.stop() }

// Stderr is the tail of its stderr; LogPath the file that holds all of it
// ("" when none is written).
func (x *Process) Stderr() string  { return x.p.stderr.String() }
func (x *Process) LogPath() string { return x.p.logPath }

// Pid is its process id (and its group's).
func (x *Process) Pid() int { return x.p.cmd.Process.Pid }

// Exited is closed once the process has exited and been reaped.
func (x *Process) Exited() <-chan struct{} { return x.p.exited }
