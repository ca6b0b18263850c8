package execmode

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/internal/procstat"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/crashmatrix/crashmatrix/sim/worker"
	"golang.org/x/sys/unix"
)

// Case runs the workers of one case in one of the two modes.
type Case interface {
	// Start runs a worker; a process worker is killed once deadline has
	// passed.
	Start(ctx context.Context, spec worker.WorkerSpec, deadline time.Duration) (Worker, error)
	// History reads the case's history so far.
	History() (history.Log, error)
	// Snapshot reads the case's stores and distils the history.
	Snapshot(ctx context.Context, c catalogue.Case, env worker.CaseEnv, space string, h history.Log) (check.Snapshot, check.Observed, error)
	// Close gives back what the case borrowed.
	Close()
}

// Worker is one running worker.
type Worker interface {
	// WaitHitOrExit returns once the worker reported a failpoint hit or
	// ended.
	WaitHitOrExit(ctx context.Context, limit time.Duration)
	// Release lets a paused worker continue.
	Release()
	// Wait returns the worker's result once it ended.
	Wait() verdict.WorkerResult
	// Kill ends a worker process now; a no-op in the in-process mode (a
	// goroutine cannot be stopped from outside).
	Kill()
}

// processCase runs workers as OS processes (the crashmatrix binary or a
// re-executed test binary) killed by SIGKILL.
type processCase struct {
	m        *Modes
	dir      string
	histPath string
}

// NewProcessCase prepares the case folder dir (emptied) for a case whose
// workers run as processes.
func (m *Modes) NewProcessCase(dir string) (Case, error) {
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "calls"), 0o755); err != nil {
		return nil, err
	}
	return &processCase{m: m, dir: dir, histPath: filepath.Join(dir, "history.jsonl")}, nil
}

func (p *processCase) History() (history.Log, error) { return history.Read(p.histPath) }

func (p *processCase) Close() {}

func (p *processCase) Snapshot(ctx context.Context, c catalogue.Case, env worker.CaseEnv, space string, h history.Log) (check.Snapshot, check.Observed, error) {
	return p.m.run.Snapshot(ctx, c, env, space, h)
}

type processWorker struct {
	pid   int
	sweep bool // Backend.ChildProcesses
	// spawnsNoted is Backend.SpawnsNoted.
	spawnsNoted bool
	// startLimit is Backend.StartTimeout: the time spent opening the
	// stores, up to this much per open, is not counted against limits.
	startLimit time.Duration
	spec       worker.WorkerSpec
	hist       string
	done       chan verdict.WorkerResult
	res        *verdict.WorkerResult
}

func (p *processCase) Start(ctx context.Context, spec worker.WorkerSpec, deadline time.Duration) (Worker, error) {
	b := p.m.run.StepBackend(spec)
	if b.StartTimeout > 0 {
		spec.StartsFile = filepath.Join(p.dir, fmt.Sprintf("worker-%d-%s.starts", spec.Phase, spec.Worker))
	}
	cmd, done, err := p.m.start(ctx, p.dir, spec, deadline)
	if err != nil {
		return nil, err
	}
	return &processWorker{pid: cmd.Process.Pid, sweep: p.m.run.Backend.ChildProcesses, spawnsNoted: p.m.run.Backend.SpawnsNoted, startLimit: b.StartTimeout, spec: spec, hist: p.histPath, done: done}, nil
}

// kill kills the worker's session (SIGKILL): the worker's process group
// and those of its store processes.
func (w *processWorker) Kill() { KillSession(w.pid, w.sweep && w.spawned()) }

// spawned says whether the worker may have started a process of its own
// (a backend whose workers note none sweeps always). Read before the
// worker has exited, a note may yet come: the sweep after its exit
// (Modes.start) is the one that settles it.
func (w *processWorker) spawned() bool { return !w.spawnsNoted || worker.Spawned(w.spec.StartsFile) }

func (w *processWorker) Wait() verdict.WorkerResult {
	if w.res == nil {
		r := <-w.done
		w.res = &r
	}
	return *w.res
}

func (w *processWorker) Release() {
	_ = os.WriteFile(w.spec.ReleaseFile, nil, 0o644)
}

func (w *processWorker) WaitHitOrExit(ctx context.Context, limit time.Duration) {
	deadline := time.Now().Add(limit)
	var starting time.Duration
	for ctx.Err() == nil {
		if now := time.Now(); !now.Before(deadline) {
			// The limit counts from the stores' start (watchDeadline).
			s, _ := worker.StartTime(w.spec.StartsFile, w.startLimit, now)
			if s <= starting {
				return
			}
			deadline = deadline.Add(s - starting)
			starting = s
		}
		if h, err := history.Read(w.hist); err == nil {
			for _, r := range h {
				// A pause parks it, and so does a server fault that holds
				// its request past its lease, once the supervisor recorded
				// that it took effect (the server stopped and resumed, the
				// request held, the case's clock past the lease); any
				// other fault it survives (a lease fault, an error) lets it
				// run on to its pause or its end. A slow sync holding
				// past the lease (sim/casefaults/slowsync.go) parks it too.
				if r.Worker == w.spec.Worker && r.Phase == w.spec.Phase && (r.Kind == history.Hit && (r.Fault == nil || r.Fault.Kind == faults.Pause) ||
					r.Kind == history.Server && r.Fault != nil && (r.Fault.Kind.HoldsPastLease() || r.Fault.Kind == faults.SlowSync) || r.Kind == history.Exit) {
					return
				}
			}
		}
		select {
		case r := <-w.done:
			w.res = &r
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// start launches a worker with its failpoints armed through GO_FAILPOINTS
// and a deadline, after which its whole process group is killed; the
// returned channel yields its result.
func (m *Modes) start(ctx context.Context, dir string, spec worker.WorkerSpec, deadline time.Duration) (*exec.Cmd, chan verdict.WorkerResult, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, err
	}
	specPath := filepath.Join(dir, fmt.Sprintf("worker-%d-%s.json", spec.Phase, spec.Worker))
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		return nil, nil, err
	}
	cmd := m.run.Launcher.Command(ctx, specPath)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	// GOTRACEBACK=all: a worker that hangs past its deadline gets a
	// SIGQUIT first, and prints every goroutine's stack to its output file.
	// TMPDIR: whatever a worker leaves in the temporary directory (a
	// re-executed test's t.TempDir before it turns into a worker; a killed
	// worker's files) goes with the case's folder, not into /tmp for ever.
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, nil, err
	}
	cmd.Env = append(filterEnv(filterEnv(filterEnv(cmd.Env, "GO_FAILPOINTS"), "GOTRACEBACK"), "TMPDIR"),
		"GO_FAILPOINTS="+faults.EnvValue(spec.Arms), "GOTRACEBACK=all", "TMPDIR="+tmp)
	// The worker's output goes to a file of the case (no pipe to drain: a
	// worker that dies leaves everything it wrote).
	outPath := filepath.Join(dir, fmt.Sprintf("worker-%d-%s.out", spec.Phase, spec.Worker))
	out, err := os.Create(outPath)
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr, cmd.Stdout = out, out
	// The worker leads a session (and so a process group) of its own: the
	// store processes it starts lead groups of their own in it (storeproc),
	// and KillSession ends them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, nil, err
	}
	m.procs.Store(cmd, struct{}{})
	done := make(chan verdict.WorkerResult, 1)
	exited := make(chan struct{})
	var timedOut atomic.Bool
	var syncing atomic.Pointer[[]string]
	go m.watchDeadline(cmd.Process.Pid, deadline, spec.StartsFile, exited, &timedOut, func() {
		// Before the stacks are asked for: a store process of the
		// worker's (a store in another language) waiting in an fsync.
		if s := sessionInSync(cmd.Process.Pid); len(s) > 0 {
			syncing.Store(&s)
		}
		m.diagnose(dir, spec.Env)
	})
	go func() {
		sweep := m.run.Backend.ChildProcesses
		stop := context.AfterFunc(ctx, func() { KillSession(cmd.Process.Pid, sweep) })
		if sweep {
			// Once the worker has exited, and before it is reaped (its
			// pid, and so its session's id, stays ours until then),
			// whatever it left running goes with it: a store process's
			// children. A worker that noted no process start of its own
			// (Backend.SpawnsNoted) left none: its spares die with its
			// session (KillAdopted), and /proc is not looked through.
			waitExited(cmd.Process.Pid)
			KillSession(cmd.Process.Pid, !m.run.Backend.SpawnsNoted || worker.Spawned(spec.StartsFile))
		}
		err := cmd.Wait()
		// From now on the worker renews no lease: a worker refused by one
		// of its leases long after this reads it here (sim/worker/deadholder.go).
		worker.StopFile(spec.StoppedFile).Record(worker.StopLine{Worker: spec.Worker, Phase: spec.Phase, PID: cmd.Process.Pid, What: worker.StopEnded, At: worker.ClockNow(spec.ClockFile)})
		close(exited)
		stop()
		out.Close()
		m.procs.Delete(cmd)
		wr := verdict.WorkerResult{Worker: spec.Worker, PID: cmd.Process.Pid, Took: time.Since(t0), StoreStarts: worker.StoreStarts(spec.StartsFile),
			StartRetries: worker.StartRetries(spec.StartsFile)}
		var ee *exec.ExitError
		switch {
		case timedOut.Load():
			wr.Exit = "timeout"
			wr.Output = outPath
			wr.Stuck = stuckFrames(outPath)
			if s := syncing.Load(); s != nil {
				wr.Stuck = append(*s, wr.Stuck...)
			}
		case err == nil:
			wr.Exit = "ok"
		case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
			wr.Exit = "killed (SIGKILL)"
		default:
			wr.Exit = fmt.Sprintf("error: %v: %s", err, panicMessage(headOf(outPath, 8192)))
		}
		done <- wr
	}()
	return cmd, done, nil
}

// watchDeadline kills the worker pid once deadline has passed. A run whose
// timings were raised while the worker ran (a slower machine now) gives it
// the raised deadline instead: the worker was started under timings the
// run itself no longer holds. The time the worker spent opening its
// stores, as its startsFile says (Backend.StartTimeout), is added: the
// deadline counts from when its stores answered; and so is the time it
// spent parked by a pause, waiting for the next foreground worker (whose
// own deadline bounds that wait). At the deadline the
// worker first gets a SIGQUIT, so that its goroutines' stacks (where it
// hung) land in its output file, then its process group a SIGKILL.
func (m *Modes) watchDeadline(pid int, deadline time.Duration, startsFile string, exited <-chan struct{}, timedOut *atomic.Bool, atDeadline func()) {
	t := time.NewTimer(deadline)
	defer t.Stop()
	limit := deadline
	var starting time.Duration
	for {
		select {
		case <-exited:
			return
		case <-t.C:
		}
		if cur := m.processTimeout(); cur > limit {
			t.Reset(cur - limit)
			limit = cur
			continue
		}
		now := time.Now()
		s, open := worker.StartTime(startsFile, m.run.Backend.StartTimeout, now)
		// Parked, each wait counted up to what the foreground worker it
		// waits for may take: its deadline and its stores' start.
		p, parked := worker.PausedTime(startsFile, limit+m.run.Backend.StartTimeout, now)
		if s += p; s > starting {
			wait := s - starting
			if open || parked {
				// Still starting: look again a little later.
				wait = max(wait, 50*time.Millisecond)
			}
			t.Reset(wait)
			starting = s
			continue
		}
		timedOut.Store(true)
		if atDeadline != nil {
			atDeadline()
		}
		_ = syscall.Kill(pid, syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(stackDumpWait):
		}
		KillSession(pid, m.run.Backend.ChildProcesses)
		return
	}
}

// ServersAtDeadline is the file of a case's folder that holds what the
// backend's servers were doing when a worker of the case hung.
const ServersAtDeadline = "servers-at-deadline.txt"

// diagnose asks the backend what its servers are doing and keeps the
// answer in the case's folder, once per case (the first worker to hang).
func (m *Modes) diagnose(dir string, env worker.CaseEnv) {
	if m.run.Backend.Diagnose == nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, ServersAtDeadline), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return // another worker of the case asked already
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), diagnoseTimeout)
	defer cancel()
	fmt.Fprintf(f, "%s\n", m.run.Backend.Diagnose(ctx, env))
}

// diagnoseTimeout bounds one Backend.Diagnose: the servers it asks may be
// the ones hung.
const diagnoseTimeout = 10 * time.Second

// stackDumpWait is how long a worker past its deadline gets to print its
// stacks after SIGQUIT before SIGKILL.
const stackDumpWait = 2 * time.Second

// headOf returns up to n bytes from the start of a file.
func headOf(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, n)
	k, _ := io.ReadFull(f, b)
	return string(b[:k])
}

// panicMessage is a worker's output without the goroutine stacks a panic
// prints after its message (they are in the output file).
func panicMessage(out string) string {
	if i := strings.Index(out, "\ngoroutine "); i >= 0 {
		out = out[:i]
	}
	return strings.TrimSpace(out)
}

// stuckFrames reads the goroutine dump a worker printed at its deadline
// and returns, for each goroutine running crashmatrix code (the worker
// machinery aside), its state and innermost crashmatrix frame: where the
// worker hung, e.g. "IO wait, 1 minutes: adapters/postgres.(*db).acquireLease
// (locks.go:27)". At most five, longest waits first as the runtime lists them.
func stuckFrames(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	const mod = "github.com/crashmatrix/crashmatrix/"
	var out []string
	seen := map[string]bool{}
	for _, g := range strings.Split(string(b), "\n\n") {
		lines := strings.Split(strings.TrimSpace(g), "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[0], "goroutine ") {
			continue
		}
		state := lines[0]
		if i, j := strings.Index(state, "["), strings.LastIndex(state, "]"); i >= 0 && j > i {
			state = state[i+1 : j]
		}
		if inSync(lines) {
			// Not a hang of the store's logic: the file system under the
			// case data did not finish a sync within the deadline.
			state = SyncStall
		}
		// The innermost crashmatrix frame, and the first frame of another
		// package that called it (the store or reference step).
		var frames []string
		var firstPkg string
		for k := 1; k+1 < len(lines) && len(frames) < 2; k += 2 {
			fn := strings.TrimSpace(lines[k])
			if !strings.HasPrefix(fn, mod) || strings.HasPrefix(fn, mod+"sim.") || strings.HasPrefix(fn, mod+"sim/worker.") || strings.HasPrefix(fn, mod+"cmd/") {
				continue
			}
			fn = strings.TrimPrefix(fn, mod)
			if i := strings.LastIndex(fn, "("); i > 0 {
				fn = fn[:i]
			}
			pkg := fn[:strings.Index(fn+".", ".")]
			if len(frames) == 1 && pkg == firstPkg {
				continue
			}
			firstPkg = cmp.Or(firstPkg, pkg)
			loc := strings.TrimSpace(lines[k+1])
			if i := strings.LastIndex(loc, "/"); i >= 0 {
				loc = loc[i+1:]
			}
			if i := strings.Index(loc, " +0x"); i >= 0 {
				loc = loc[:i]
			}
			frames = append(frames, fmt.Sprintf("%s (%s)", fn, loc))
		}
		// The store's own method the harness called, wherever it is (a
		// third-party store is outside this module): what blocked.
		switch m := storeMethod(lines); {
		case m == "":
		case len(frames) > 0 && frames[0] == m:
			frames[0] = "store method " + m
		default:
			frames = append([]string{"store method " + m}, frames...)
		}
		if len(frames) > 0 {
			f := state + ": " + strings.Join(frames, " called from ")
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
		if len(out) == 5 {
			break
		}
	}
	return out
}

// SyncStall is the state stuckFrames gives a goroutine waiting in an
// fsync or fdatasync system call.
const SyncStall = "an fsync the file system had not finished"

// inSync says whether a goroutine's stack (header, then a function line
// and a location line per frame, innermost first) is inside an fsync or
// fdatasync: Go's own (syscall, x/sys/unix, os.File.Sync) or a C
// library's as modernc's SQLite calls it (libc.Xfsync), or a raw system
// call of syncSyscalls' numbers in the innermost frames.
func inSync(lines []string) bool {
	for k := 1; k < len(lines) && k < 16; k += 2 {
		fn := strings.TrimSpace(lines[k])
		for _, f := range syncFrames {
			if strings.Contains(fn, f) {
				return true
			}
		}
	}
	return false
}

// syncSyscalls are the system call numbers of fsync and fdatasync on this
// architecture (those Linux numbers /proc/PID/syscall shows).
var syncSyscalls = map[string][2]int{"amd64": {74, 75}, "arm64": {82, 83}, "riscv64": {82, 83}, "386": {118, 148}}[runtime.GOARCH]

// syncFrames are the function lines of a stack that inSync takes for an
// fsync or fdatasync.
var syncFrames = func() []string {
	f := []string{"syscall.Fsync(", "syscall.Fdatasync(", "unix.Fsync(", "unix.Fdatasync(", "os.(*File).Sync(", "libc.Xfsync(", "libc.Xfdatasync("}
	if syncSyscalls != [2]int{} {
		for _, n := range syncSyscalls {
			f = append(f, fmt.Sprintf("syscall.Syscall(%#x,", n), fmt.Sprintf("syscall.Syscall6(%#x,", n))
		}
	}
	return f
}()

// sessionInSync names the processes of session sid, its leader (the
// worker, whose own stacks say as much) aside, that are inside an fsync or
// fdatasync: a store process (store-cmd) the worker waits on, stuck on the
// disk rather than hung. Linux only; nothing where /proc says nothing.
func sessionInSync(sid int) []string {
	if syncSyscalls == [2]int{} {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == sid {
			continue
		}
		st, err := procstat.Read(pid)
		if err != nil || !worker.InSession(st, sid) {
			continue
		}
		sc, err := os.ReadFile(filepath.Join("/proc", e.Name(), "syscall"))
		if err != nil || !inSyncSyscall(string(sc)) {
			continue
		}
		out = append(out, fmt.Sprintf("%s: process %d (%s) of the worker, a store process it waited on", SyncStall, pid, st.Comm))
	}
	return out
}

// inSyncSyscall says whether the text of /proc/PID/syscall (the number of
// the system call the process is blocked in, then its arguments) is an
// fsync or fdatasync.
func inSyncSyscall(sc string) bool {
	f := strings.Fields(sc)
	if len(f) == 0 {
		return false
	}
	n, err := strconv.Atoi(f[0])
	return err == nil && (n == syncSyscalls[0] || n == syncSyscalls[1])
}

// storeMethod returns, from one goroutine's stack (its header, then a
// function line and a location line per frame, innermost first), the
// store method the reference or the harness called, as "pkg.(*T).Method
// (file.go:12)": the frame just inside the outermost run of frames of
// the reference and of sim (the service, its observing wrappers) that is
// neither of them nor the Go runtime or standard library. "" when the
// goroutine is not in a store call.
func storeMethod(lines []string) string {
	const mod = "github.com/crashmatrix/crashmatrix/"
	harness := func(fn string) bool {
		return strings.HasPrefix(fn, mod+"reference") || strings.HasPrefix(fn, mod+"sim.") || strings.HasPrefix(fn, mod+"sim/worker.") || strings.HasPrefix(fn, mod+"faults.")
	}
	var callee, loc string
	for k := 1; k+1 < len(lines); k += 2 {
		fn := strings.TrimSpace(lines[k])
		if harness(fn) {
			if callee == "" {
				return ""
			}
			if i := strings.LastIndex(callee, "("); i > 0 {
				callee = callee[:i]
			}
			callee = strings.TrimPrefix(callee, mod)
			if i := strings.LastIndex(loc, "/"); i >= 0 {
				loc = loc[i+1:]
			}
			if i := strings.Index(loc, " +0x"); i >= 0 {
				loc = loc[:i]
			}
			return fmt.Sprintf("%s (%s)", callee, loc)
		}
		// The standard library's packages have no dot in their first
		// path element; a store's (or its driver's) have one.
		at := strings.TrimSpace(lines[k+1])
		if first, _, path := strings.Cut(fn, "/"); path && strings.Contains(first, ".") && !strings.HasPrefix(at, "<autogenerated>") {
			callee, loc = fn, at
		}
	}
	return ""
}

// KillSession kills (SIGKILL) the processes of session sid, the session a
// worker leads: its own process group and, with sweep, each group /proc
// shows in the session (a store process's, with whatever that store
// started: Backend.ChildProcesses).
func KillSession(sid int, sweep bool) {
	_ = syscall.Kill(-sid, syscall.SIGKILL)
	defer worker.KillAdopted(sid)
	if !sweep {
		return
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == sid {
			continue
		}
		if st, err := procstat.Read(pid); err == nil && st.Session == sid {
			_ = syscall.Kill(-st.PGRP, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitExited waits until process pid (a child) has exited, without reaping
// it.
func waitExited(pid int) {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
}
