// Package storeproc implements the reference store interfaces over the
// store protocol (docs/store-protocol.md): it starts a store written in
// any language as a child process and speaks newline-delimited JSON with
// it over its stdin and stdout. Bad input from the other side (a process
// that exits, a line that is not the protocol, a reply to a request not
// asked, a reply past the deadline, another protocol version) is a
// *ProtocolError naming the request, what came back and the tail of the
// store's stderr; no call waits past its deadline.
package storeproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Protocol is the protocol version this package speaks.
const Protocol = "crashmatrix-store/1"

// EnvDir names the environment variable that carries the data directory
// to the store process (also sent in hello).
const EnvDir = "CRASHMATRIX_STORE_DIR"

// The interfaces a store process may declare in its hello reply.
const (
	StoreOperations  = "operations"
	StoreStates      = "states"
	StoreRegistry    = "registry"
	StoreGraph       = "graph"
	StoreLocks       = "locks"
	StoreCheckpoints = "checkpoints"
	StorePlans       = "plans"
)

var knownStores = []string{StoreOperations, StoreStates, StoreRegistry, StoreGraph, StoreLocks, StoreCheckpoints, StorePlans}

// Options say which command to start and where its data lives.
type Options struct {
	// Command is the store's command line, split like a shell does (single
	// and double quotes, backslash escapes), e.g. `python3 mystore.py`.
	Command string
	// WorkDir is the directory the command runs in ("" = the current one).
	WorkDir string
	// Dir is the data directory sent in hello and in $CRASHMATRIX_STORE_DIR;
	// Start creates it. It holds the store's own files only: nothing of
	// the harness is written there (a power loss is judged by what the
	// store made in it).
	Dir string
	// LogDir, when set, is where each store process's stderr is written in
	// full, as store-<pid>.log (Start creates it); never inside Dir. Empty:
	// only the tail every error shows is kept.
	LogDir string
	// TempDir is the store process's TMPDIR; Start creates it. Empty: the
	// folder tmp beside Dir. Every process of one store gets the same one.
	TempDir string
	// Namespace and Mutant are passed on in hello.
	Namespace, Mutant string
	// Timeout bounds the wait for each message of a call (10 s if zero);
	// HelloTimeout the store's start: the wait for the hello reply (60 s
	// if zero). A store that does not answer in time is killed with its
	// whole process group.
	Timeout, HelloTimeout time.Duration
	// Procs is how many store processes serve calls at once (1 if zero):
	// calls beyond that wait for a free process.
	Procs int
	// Require lists interfaces the store must declare in hello.
	Require []string
	// Pool, when set, keeps the processes of a store that declares reopen
	// between clients (Pool). Never in a worker process: a worker's store
	// processes die with it.
	Pool *Pool
	// Spare: take a store process the supervisor (this worker's parent)
	// started ahead of need and took through hello and close (Spares),
	// when it has one ready, rather than start one; the case's hello
	// greets it. A worker's: the process dies with the worker.
	Spare bool
	// OnStart, when set, is told how long each store process this client
	// started took to start: from its exec to its hello reply; for a
	// spare (Spare), from the request for it to its hello reply, what the
	// worker waited. A process reused from Pool was not started, and is
	// not told.
	OnStart func(took time.Duration)
	// OnProtocolError, when set, is told every protocol violation before
	// the call returns it (a crash-matrix worker ends itself there, so the
	// case is undecided rather than judged on a broken conversation).
	OnProtocolError func(ctx context.Context, err *ProtocolError)
	// BeforeStart, when set, is called before each store process this
	// client starts itself (not a spare's, not a pooled one's); its error
	// stops the start (a crash-matrix worker notes there that it starts
	// a process of its own: worker.NoteSpawn).
	BeforeStart func() error

	// logName and extraEnv are StartProcess's (another protocol's
	// process): the log file's prefix ("store" when empty) and variables
	// set besides the store's.
	logName  string
	extraEnv []string
}

func (o Options) logPrefix() string {
	if o.logName != "" {
		return o.logName
	}
	return "store"
}

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return 10 * time.Second
}

// DefaultHelloTimeout bounds a store's start when Options.HelloTimeout
// is zero.
const DefaultHelloTimeout = 60 * time.Second

func (o Options) helloTimeout() time.Duration {
	if o.HelloTimeout > 0 {
		return o.HelloTimeout
	}
	return DefaultHelloTimeout
}

// ProtocolError is a violation of the protocol by the store process.
type ProtocolError struct {
	// Command is the store's command line.
	Command string
	// Request is the request it concerns ("ops.create #7 {...}").
	Request string
	// Problem says what went wrong; Got is what came back (a line, an
	// exit status), if anything.
	Problem, Got string
	// Stderr is the tail of the process's stderr; Log the file that holds
	// all of it ("" when none was written: Options.LogDir).
	Stderr, Log string
	// NoStart: the process did not answer hello within the start timeout
	// (Options.HelloTimeout), a setup problem more than a broken store.
	NoStart bool
	// Process says what the process is ("store" when empty; "service"
	// for the service protocol's).
	Process string
}

func (e *ProtocolError) Error() string {
	what := e.Process
	if what == "" {
		what = "store"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s process %q, request %s: %s", what, e.Command, e.Request, e.Problem)
	if e.Got != "" {
		fmt.Fprintf(&b, "; got: %s", e.Got)
	}
	if e.Stderr != "" {
		fmt.Fprintf(&b, "\n--- %s stderr (tail) ---\n%s", what, strings.TrimRight(e.Stderr, "\n"))
	} else {
		fmt.Fprintf(&b, " (%s stderr empty)", what)
	}
	if e.Log != "" {
		fmt.Fprintf(&b, "\n(the %s's whole stderr: %s)", what, e.Log)
	}
	return b.String()
}

// Permanent marks a protocol violation as nothing a retry fixes.
func (e *ProtocolError) Permanent() bool { return true }

// message is any line the store sends: a reply (ok or error) or an at.
type message struct {
	ID    *int64          `json:"id"`
	OK    json.RawMessage `json:"ok"`
	Error *wireError      `json:"error"`
	At    *atMsg          `json:"at"`
	// okUnchecked: OK was sliced out of the line unjudged (readEnvelope);
	// decoding it, or json.Valid, judges it.
	okUnchecked bool
}

type wireError struct {
	Code     string `json:"code"`
	Definite *bool  `json:"definite"`
	Message  string `json:"message"`
}

type atMsg struct {
	Point string `json:"point"`
	Step  int    `json:"step"`
}

// event is one line of stdout, or the end of it.
type event struct {
	line []byte
	end  error // set on the last event: why stdout ended
}

// proc is one running store process. Its stdout is read by the goroutine
// of the call in progress, right where the reply is awaited (no reader
// goroutine in between): a round trip costs one wake-up on each side of
// the pipe. Calls on one proc never overlap (the pool hands it out).
type proc struct {
	command string // the command line and directory it was started with
	workDir string
	pid     int       // its process id, which leads its group
	cmd     *exec.Cmd // nil when another process started it (adopt)
	// spareStderr is the read end of a spare's stderr, which the worker
	// that takes it reads (Spares); key what it was started for.
	spareStderr *os.File
	key         *spareKey
	// spareOf is, in the worker that took a spare, the address of the
	// supervisor's spare service it came from, and stderrFD its stderr's
	// read end (given back with it).
	spareOf   string
	stderrFD  int
	reopen    bool // its store declared reopen: it may be pooled
	stdin     io.WriteCloser
	stdout    *os.File // the read end, blocking: in reads through poll(2), with deadlines
	in        stdoutReader
	r         *bufio.Reader
	ended     error // set once stdout has ended: why
	stderr    *tail
	nextID    int64
	broken    bool // a violation, a kill or a cancellation: not to be reused
	exited    chan struct{}
	waitErr   error
	log       *os.File
	logPath   string // the file log writes to ("" = none)
	closeOnce sync.Once
}

const stderrTail = 8 << 10

// start starts the store process; hello is the caller's job.
func start(opts *Options) (*proc, error) {
	p, stderr, err := launch(opts)
	if err != nil {
		return nil, err
	}
	p.watch(opts.LogDir, opts.logPrefix(), stderr, p.reap)
	return p, nil
}

// launch starts the store process with its stdin and stdout piped to p
// and returns the read end of its stderr, which nothing reads yet: start
// watches it at once, Spares when it hands the process to a worker.
func launch(opts *Options) (*proc, *os.File, error) {
	argv, err := SplitCommand(opts.Command)
	if err != nil {
		return nil, nil, err
	}
	if err := makeDirs(opts); err != nil {
		return nil, nil, err
	}
	// Absolute: the store may run in another directory than ours.
	tmp, err := filepath.Abs(opts.tempDir())
	if err != nil {
		return nil, nil, fmt.Errorf("store temporary directory: %w", err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, nil, fmt.Errorf("store temporary directory: %w", err)
	}
	if opts.BeforeStart != nil {
		if err := opts.BeforeStart(); err != nil {
			return nil, nil, err
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = opts.WorkDir
	cmd.Env = append(storeEnv(os.Environ(), opts.Dir, tmp), opts.extraEnv...)
	// The store leads a process group of its own, so that ending it ends
	// whatever it started too (kill), and dies when its parent dies. It
	// stays in its parent's session: a supervisor ending a worker ends the
	// worker's session (sim), its store processes' groups included.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	// Our own pipe for stdout (not StdoutPipe, which Wait closes when the
	// process exits): lines written just before an exit stay readable.
	// Its read end stays blocking, out of the runtime's poller: a reply is
	// awaited in poll(2) by the calling goroutine's thread (stdoutReader).
	pr, pw, err := blockingPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stdout = pw
	// And for stderr (not StderrPipe either): a child the store left
	// behind may hold it open after the store's exit, which must not keep
	// Wait from returning.
	stderr, ew, err := os.Pipe()
	if err != nil {
		_ = pr.Close()
		_ = pw.Close()
		return nil, nil, err
	}
	cmd.Stderr = ew
	err = cmd.Start()
	_ = pw.Close() // the child has its copies
	_ = ew.Close()
	if err != nil {
		_ = pr.Close()
		_ = stderr.Close()
		return nil, nil, fmt.Errorf("store command %q: %w", opts.Command, err)
	}
	p := newProc(opts.Command, opts.WorkDir, cmd.Process.Pid, stdin, pr)
	p.cmd = cmd
	return p, stderr, nil
}

// makeDirs makes the data directory and the log directory (if any).
func makeDirs(opts *Options) error {
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return fmt.Errorf("store data directory: %w", err)
	}
	if opts.LogDir != "" {
		if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
			return fmt.Errorf("store log directory: %w", err)
		}
	}
	return nil
}

func newProc(command, workDir string, pid int, stdin io.WriteCloser, stdout *os.File) *proc {
	p := &proc{command: command, workDir: workDir, pid: pid, stdin: stdin, stderr: &tail{max: stderrTail}, exited: make(chan struct{})}
	p.setStdout(stdout)
	return p
}

// setStdout makes stdout (a blocking read end, not the runtime poller's)
// the pipe p reads its messages from.
func (p *proc) setStdout(stdout *os.File) {
	p.stdout = stdout
	p.in = stdoutReader{f: stdout, fd: int32(stdout.Fd())}
	p.r = bufio.NewReaderSize(&p.in, 64<<10)
}

// blockingPipe is os.Pipe with a blocking read end, which the runtime's
// poller does not watch (os.NewFile leaves a blocking descriptor alone).
func blockingPipe() (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}

// pollSlice bounds one poll(2) wait of stdoutReader: a cancelled context
// is seen within it.
const pollSlice = 20 * time.Millisecond

// stdoutReader reads a store's stdout until its deadline or its context's
// end (set by next for each wait). The reply to a request is awaited in
// poll(2) by the thread of the goroutine that sent it, then read: two
// system calls, where a read through the runtime's poller costs a failed
// read, a parked goroutine, an epoll wake-up on another thread and a
// thread hand-over besides (BenchmarkStoreCall).
type stdoutReader struct {
	f        *os.File
	fd       int32
	ctx      context.Context
	deadline time.Time
	pfd      [1]unix.PollFd
}

func (r *stdoutReader) Read(b []byte) (int, error) {
	for {
		left := time.Until(r.deadline)
		if left <= 0 || (r.ctx != nil && r.ctx.Err() != nil) {
			return 0, os.ErrDeadlineExceeded
		}
		ms := int((min(left, pollSlice) + time.Millisecond - 1) / time.Millisecond)
		r.pfd[0] = unix.PollFd{Fd: r.fd, Events: unix.POLLIN}
		n, err := unix.Poll(r.pfd[:], ms)
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			return 0, os.NewSyscallError("poll", err)
		}
		// Readable, or its writers are gone (a read of 0: the end).
		return r.f.Read(b)
	}
}

// reap waits until the process (our child) has exited, kills what it
// left running in its group and reaps it.
func (p *proc) reap() error {
	// Once the store has exited, and before it is reaped (its pid, and so
	// its group's id, stays ours until then), whatever it left running in
	// its group goes with it.
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	return p.cmd.Wait()
}

// watch copies the process's stderr (nil: someone else holds it) into its
// tail and, with logDir, into <logPrefix>-<pid>.log there, and marks it exited
// once wait returns.
func (p *proc) watch(logDir, logPrefix string, stderr *os.File, wait func() error) {
	if logDir != "" && stderr != nil {
		path := filepath.Join(logDir, fmt.Sprintf("%s-%d.log", logPrefix, p.pid))
		if f, err := os.Create(path); err == nil {
			p.log, p.logPath = f, path
		}
	}
	live.Store(p, struct{}{})
	copied := make(chan struct{})
	if stderr == nil {
		close(copied)
	} else {
		go func() {
			var w io.Writer = p.stderr
			if p.log != nil {
				w = io.MultiWriter(p.stderr, p.log)
			}
			_, _ = io.Copy(w, stderr)
			close(copied)
		}()
	}
	go func() {
		p.waitErr = wait()
		// Its stderr ends with the last process holding it: the group is
		// gone, one that left the group has a moment, then it is cut off.
		if stderr != nil {
			select {
			case <-copied:
			case <-time.After(time.Second):
				_ = stderr.Close()
				<-copied
			}
			_ = stderr.Close()
		}
		if p.log != nil {
			_ = p.log.Close()
		}
		live.Delete(p)
		close(p.exited)
	}()
}

// harnessVars are what the harness sets for itself in some of its
// processes only (a worker's failpoints, its traceback level and spec, a
// conformance run's filter): storeEnv leaves them out, so that every
// process of a store gets the same environment, whichever process starts
// it.
var harnessVars = []string{"GO_FAILPOINTS", "GOTRACEBACK", "CRASHMATRIX_WORKER_SPEC", "CRASHMATRIX_CONFORMANCE_RUN", "TMPDIR", EnvDir}

// storeEnv is a store process's environment (docs/store-protocol.md,
// section 7): env without harnessVars, with $CRASHMATRIX_STORE_DIR the
// data directory and $TMPDIR tmp.
func storeEnv(env []string, dir, tmp string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(harnessVars, k) {
			out = append(out, kv)
		}
	}
	return append(out, EnvDir+"="+dir, "TMPDIR="+tmp)
}

// tempDir is the store processes' TMPDIR: TempDir, or tmp beside Dir.
func (o Options) tempDir() string {
	if o.TempDir != "" {
		return o.TempDir
	}
	return filepath.Join(filepath.Dir(filepath.Clean(o.Dir)), "tmp")
}

// live holds every store process started and not yet reaped.
var live sync.Map

// KillAll kills every store process this process started that is still
// running, with its whole group, and waits (briefly) until they are gone:
// for a harness that exits (or is interrupted) with clients still open.
func KillAll() {
	var wg sync.WaitGroup
	live.Range(func(k, _ any) bool {
		wg.Add(1)
		go func() { defer wg.Done(); k.(*proc).killGroup() }()
		return true
	})
	wg.Wait()
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// send writes one message line.
func (p *proc) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return p.sendLine(append(b, '\n'))
}

// sendLine writes one message line, its newline included.
func (p *proc) sendLine(b []byte) error {
	_, err := p.stdin.Write(b)
	return err
}

// next waits up to d for the next line. timedOut reports the deadline.
func (p *proc) next(ctx context.Context, d time.Duration) (ev event, timedOut bool, err error) {
	if p.ended != nil {
		return event{end: p.ended}, false, nil
	}
	deadline := time.Now().Add(d)
	// A cancelled context cuts the wait short the same way.
	p.in.ctx, p.in.deadline = ctx, deadline
	defer func() { p.in.ctx = nil }()
	for {
		line, rerr := p.r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 && rerr == nil {
			return event{line: bytes.TrimRight(line, "\r\n")}, false, nil
		}
		switch {
		case rerr == nil:
			continue // a blank line
		case errors.Is(rerr, os.ErrDeadlineExceeded):
			// What came of a line cut short is lost: the caller kills the
			// process either way.
			if cerr := ctx.Err(); cerr != nil {
				return event{}, false, cerr
			}
			return event{}, true, nil
		case errors.Is(rerr, io.EOF):
			if len(bytes.TrimSpace(line)) > 0 {
				// A last line without its newline: the protocol's lines
				// end with one, but the line is what it said.
				p.ended = p.endOfStdout(deadline)
				return event{line: bytes.TrimRight(line, "\r\n")}, false, nil
			}
			p.ended = p.endOfStdout(deadline)
		default:
			p.ended = fmt.Errorf("reading its stdout failed: %w", rerr)
		}
		return event{end: p.ended}, false, nil
	}
}

// endOfStdout says why stdout ended: the exit status once the process has
// exited (waiting for it until deadline at most).
func (p *proc) endOfStdout(deadline time.Time) error {
	t := time.NewTimer(max(time.Until(deadline), 0))
	defer t.Stop()
	select {
	case <-p.exited:
		return fmt.Errorf("the process closed its stdout and exited (%s)", exitText(p.waitErr))
	case <-t.C:
		return errors.New("the process closed its stdout (it has not exited)")
	}
}

// kill ends the process and its whole group at once and waits (briefly)
// until it is gone.
func (p *proc) kill() {
	p.broken = true
	p.killGroup()
	p.closeStdout()
}

// killGroup kills the process's group and waits (5 s at most) until the
// process is reaped.
func (p *proc) killGroup() {
	select {
	case <-p.exited:
		return // reaped, its group killed before: the pid may be another's now
	default:
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
}

// stop closes stdin and gives the process 5 s to exit before killing it.
func (p *proc) stop() {
	_ = p.stdin.Close()
	select {
	case <-p.exited:
		p.closeStdout()
	case <-time.After(5 * time.Second):
		p.kill()
	}
}

// closeStdout closes the read end of stdout once the process is done with.
func (p *proc) closeStdout() { p.closeOnce.Do(func() { _ = p.stdout.Close() }) }

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// SplitCommand splits a command line like a POSIX shell does for words:
// white space separates, single quotes keep everything, double quotes keep
// everything but backslash escapes of `"`, `\` and `$`; no expansion.
func SplitCommand(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("store command %q: unterminated single quote", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("store command %q: unterminated double quote", s)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, errors.New("store command is empty")
	}
	return out, nil
}
