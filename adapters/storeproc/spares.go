package storeproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crashmatrix/crashmatrix/internal/procstat"
	"golang.org/x/sys/unix"
)

// Spares keeps store processes started ahead of need for the workers this
// process (a crash-matrix supervisor) starts, so that a worker's store
// start-up (a JVM, an interpreter) is off the case's critical path: while
// a case runs, the supervisor starts the next workers' store processes,
// greets each (hello, on a data directory of its own) and closes it
// (close), which a store that declares reopen serves as it would between
// two cases (section 3 of docs/store-protocol.md). A worker (Options.Spare)
// asks its parent for one over a Unix socket and gets its stdin, stdout
// and stderr and a pidfd; it greets the process with its case's hello, and
// the process serves the case as one started afresh would.
//
// A worker that ends without a crash (its client closes) sends its spare
// close and, once the store has replied, gives it back (Client.release):
// the store let go of the case's data, as between two cases of the
// supervisor's pool, and the process waits for the next worker. A spare
// whose worker is killed, or whose store broke the protocol, is never
// given back.
//
// A spare dies with the worker that holds it: the supervisor, which
// started it, kills it with the worker's session (KillAdopted, called
// where the supervisor kills a worker's session, after every worker's
// exit), before the worker is reaped, so nothing of a crashed worker
// survives into recovery; and it dies with the supervisor (parent-death
// signal). A store that does not declare reopen gets no spares: its
// workers start their own processes, as before.
type Spares struct {
	keep    int // grows by one, up to maxKeep, when a worker finds none ready
	allowed []spareCmd

	mu       sync.Mutex
	ready    map[spareKey][]*proc
	starting map[spareKey]int
	failed   map[spareKey]int // consecutive spares that did not get ready
	// waiters are the workers waiting for a spare under way (claim), the
	// first first; each holds a claim on one of the starting ones.
	waiters map[spareKey][]chan *proc
	closed  bool
	// warming are the spares between their start and their close reply;
	// prepares counts the goroutines that start them.
	warming  map[*proc]bool
	prepares sync.WaitGroup
	// Started counts the spares started, Handed those a worker took,
	// Returned those a worker gave back.
	started, handed, returned atomic.Int64
}

type spareCmd struct{ command, workDir string }

// spareKey says which processes can serve a request: the same command,
// run in the same directory, with the same TMPDIR.
type spareKey struct {
	Command string `json:"command"`
	WorkDir string `json:"workDir"`
	TempDir string `json:"tempDir"`
	// HelloTimeout and Timeout are the worker's Options' (milliseconds).
	HelloTimeout int64 `json:"helloTimeoutMs"`
	Timeout      int64 `json:"timeoutMs"`
}

// spareRequest is a worker's request: a spare of Key, or (Return, its
// pid) the spare it took back, with its stdin, stdout and stderr
// (SCM_RIGHTS), closed and ready for the next worker.
type spareRequest struct {
	Key    spareKey `json:"key"`
	Return int      `json:"return,omitempty"`
	NextID int64    `json:"nextId,omitempty"`
}

// spareReply is the supervisor's answer; with a process, its stdin,
// stdout, stderr and pidfd come with it (SCM_RIGHTS).
type spareReply struct {
	PID    int    `json:"pid,omitempty"`
	NextID int64  `json:"nextId,omitempty"`
	None   string `json:"none,omitempty"` // why there is none
}

// maxKeep bounds how many spares of a command wait at once.
const maxKeep = 12

// maxSpareFailures is how many spares in a row may fail to get ready (no
// reopen, no hello) before a command gets no more.
const maxSpareFailures = 3

// NewSpares serves spares of the given commands (each run in workDir) to
// this process's workers, keeping keep (at least 1) ready per command once
// a worker has asked for one. Close stops the idle ones.
func NewSpares(keep int, workDir string, commands ...string) (*Spares, error) {
	if err := listenSpares(); err != nil {
		return nil, err
	}
	sp := &Spares{keep: max(keep, 1), ready: map[spareKey][]*proc{}, starting: map[spareKey]int{}, failed: map[spareKey]int{}, warming: map[*proc]bool{},
		waiters: map[spareKey][]chan *proc{}}
	for _, c := range commands {
		if c != "" {
			sp.allowed = append(sp.allowed, spareCmd{c, workDir})
		}
	}
	srv.mu.Lock()
	srv.sets = append(srv.sets, sp)
	srv.mu.Unlock()
	return sp, nil
}

// Counts says how many spares were started, how many times a worker took
// one, and how many times a worker gave one back.
func (sp *Spares) Counts() (started, handed, returned int64) {
	return sp.started.Load(), sp.handed.Load(), sp.returned.Load()
}

// SpareTotals sums Counts over every Spares of this process.
func SpareTotals() (started, handed, returned int64) {
	srv.mu.Lock()
	sets := slices.Clone(srv.sets)
	srv.mu.Unlock()
	for _, sp := range sets {
		s, h, r := sp.Counts()
		started, handed, returned = started+s, handed+h, returned+r
	}
	return started, handed, returned
}

// Close stops the spares waiting for a worker and those starting, and
// returns once they are gone; a later request starts them again.
func (sp *Spares) Close() error {
	sp.mu.Lock()
	var idle []*proc
	for _, ps := range sp.ready {
		idle = append(idle, ps...)
	}
	for p := range sp.warming {
		idle = append(idle, p)
	}
	sp.ready = map[spareKey][]*proc{}
	sp.closed = true
	for _, ws := range sp.waiters {
		for _, ch := range ws {
			ch <- nil
		}
	}
	sp.waiters = map[spareKey][]chan *proc{}
	sp.mu.Unlock()
	for _, p := range idle {
		p.kill()
	}
	sp.prepares.Wait()
	return nil
}

// srv is this process's spare service: one socket, the Spares registered
// on it (newest last), and the spares handed to each worker session.
var srv struct {
	once    sync.Once
	err     error
	mu      sync.Mutex
	sets    []*Spares
	adopted map[int][]*proc
	by      map[int]int // a handed spare's group → the session that took it
}

// spareAddr is the abstract Unix socket of process pid's spare service.
func spareAddr(pid int) string { return "@crashmatrix-store-spares-" + strconv.Itoa(pid) }

func listenSpares() error {
	srv.once.Do(func() {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: spareAddr(os.Getpid()), Net: "unix"})
		if err != nil {
			srv.err = fmt.Errorf("store spares: %w", err)
			return
		}
		srv.adopted = map[int][]*proc{}
		srv.by = map[int]int{}
		go func() {
			for {
				conn, err := ln.AcceptUnix()
				if err != nil {
					return
				}
				go serveSpare(conn)
			}
		}()
	})
	return srv.err
}

// KillAdopted kills the spares handed to the worker that leads session
// sid, with their groups, and waits until they are gone. The supervisor
// calls it wherever it kills a worker's session.
func KillAdopted(sid int) {
	srv.mu.Lock()
	ps := srv.adopted[sid]
	delete(srv.adopted, sid)
	srv.mu.Unlock()
	for _, p := range ps {
		p.killGroup()
	}
	srv.mu.Lock()
	for _, p := range ps {
		delete(srv.by, p.pid)
	}
	srv.mu.Unlock()
}

// AdoptedBy returns the session of the worker that took the spare leading
// process group pgid; 0 when none did.
func AdoptedBy(pgid int) int {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.by[pgid]
}

// serveSpare answers one worker's request.
func serveSpare(conn *net.UnixConn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(spareAsk))
	reply := func(r spareReply, fds ...int) error {
		b, _ := json.Marshal(r)
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		_, _, err := conn.WriteMsgUnix(append(b, '\n'), oob, nil)
		return err
	}
	sid, problem := spareWorker(conn)
	if problem != "" {
		_ = reply(spareReply{None: problem})
		return
	}
	buf := make([]byte, 8192)
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return
	}
	fds := rights(oob[:oobn])
	var req spareRequest
	if json.Unmarshal(buf[:n], &req) != nil {
		closeFDs(fds)
		return
	}
	if req.Return > 0 {
		ok := takeBack(sid, req, fds)
		_ = reply(spareReply{PID: req.Return, None: map[bool]string{true: "", false: "not taken back"}[ok]})
		return
	}
	closeFDs(fds)
	key := req.Key
	sp := setFor(key)
	if sp == nil {
		_ = reply(spareReply{None: "no spares of this command"})
		return
	}
	p := sp.await(key)
	if p == nil {
		_ = reply(spareReply{None: "none ready"})
		return
	}
	_ = conn.SetDeadline(time.Now().Add(spareAsk))
	pidfd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		p.kill()
		_ = reply(spareReply{None: "pidfd: " + err.Error()})
		return
	}
	defer unix.Close(pidfd)
	// Adopted before it is handed over: from here on, the end of the
	// worker's session ends it.
	srv.mu.Lock()
	srv.adopted[sid] = append(srv.adopted[sid], p)
	srv.by[p.pid] = sid
	srv.mu.Unlock()
	err = reply(spareReply{PID: p.pid, NextID: p.nextID}, int(p.stdin.(*os.File).Fd()), int(p.stdout.Fd()), int(p.spareStderr.Fd()), pidfd)
	// Our copies go: the worker holds the pipes now.
	_ = p.stdin.Close()
	p.closeStdout()
	_ = p.spareStderr.Close()
	if st, serr := procstat.Read(sid); err != nil || serr != nil || st.Gone() {
		// The worker died before it got the process, or while it was
		// being handed over (KillAdopted may have run before the
		// adoption): it goes now.
		p.killGroup()
		return
	}
	sp.handed.Add(1)
}

// spareWorker checks the peer is a worker of ours: our child, of our
// user, leading a session of its own (the one killed with it). It returns
// that session's id.
func spareWorker(conn *net.UnixConn) (sid int, problem string) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, err.Error()
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil || cerr != nil {
		return 0, "no peer credentials"
	}
	st, err := procstat.Read(int(cred.Pid))
	if err != nil || int(cred.Uid) != os.Getuid() || st.PPID != os.Getpid() || st.Session != st.PID {
		return 0, "not a worker of this process (its child leading a session)"
	}
	return st.PID, ""
}

// setFor returns the newest open Spares that serves key's command.
func setFor(key spareKey) *Spares {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for i := len(srv.sets) - 1; i >= 0; i-- {
		sp := srv.sets[i]
		if slices.Contains(sp.allowed, spareCmd{key.Command, key.WorkDir}) {
			return sp
		}
	}
	return nil
}

// spareAsk bounds each exchange on a spare service's socket (a request,
// a reply); a worker's wait for a spare is bounded by its hello timeout.
const spareAsk = 10 * time.Second

// await returns a ready spare of key; when none is ready, one already
// under way that no other worker waits for (claim); nil when there is
// neither (the worker then starts its own). Waiting for a spare under way
// costs the worker no more than starting its own would (that one started
// earlier), and saves a start: a spare comes back when its worker ends
// without a crash and serves the next one, a process the worker started
// dies with it. A worker that finds none ready makes the supervisor keep
// one more (grow).
func (sp *Spares) await(key spareKey) *proc {
	p := sp.take(key)
	if p == nil {
		sp.grow()
		p = sp.claim(key, min(time.Duration(key.HelloTimeout)*time.Millisecond, spareWait))
	}
	sp.fill(key)
	return p
}

// spareWait bounds a worker's wait for a spare under way (within spareAsk,
// the bound on the exchange).
const spareWait = spareAsk * 4 / 5

// claim waits up to limit for a spare of key that is starting and that no
// other worker waits for: nil when there is none, or when it did not get
// ready in time.
func (sp *Spares) claim(key spareKey, limit time.Duration) *proc {
	sp.mu.Lock()
	if sp.closed || sp.starting[key] <= len(sp.waiters[key]) || limit <= 0 {
		sp.mu.Unlock()
		return nil
	}
	ch := make(chan *proc, 1)
	sp.waiters[key] = append(sp.waiters[key], ch)
	sp.mu.Unlock()
	// Claimed spares are not ahead of need: others take their place.
	sp.fill(key)
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case p := <-ch:
		return p
	case <-t.C:
	}
	sp.mu.Lock()
	ws := sp.waiters[key]
	if i := slices.Index(ws, ch); i >= 0 {
		sp.waiters[key] = slices.Delete(ws, i, i+1)
		sp.mu.Unlock()
		return nil
	}
	sp.mu.Unlock()
	// Handed over as the wait ended.
	return <-ch
}

// grow keeps one more spare ready (up to maxKeep): a worker found none.
func (sp *Spares) grow() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.keep = min(sp.keep+1, maxKeep)
}

// takeBack puts the spare pid, which the worker that leads session sid
// took and now gives back closed, with its pipes fds, among the ready
// spares; false (and the process killed) when it is no spare of that
// worker's or the pipes are not all there.
func takeBack(sid int, req spareRequest, fds []int) bool {
	srv.mu.Lock()
	var p *proc
	ps := srv.adopted[sid]
	for i, q := range ps {
		if q.pid == req.Return {
			p = q
			srv.adopted[sid] = append(ps[:i:i], ps[i+1:]...)
			delete(srv.by, q.pid)
			break
		}
	}
	srv.mu.Unlock()
	if p == nil {
		closeFDs(fds)
		return false
	}
	var sp *Spares
	if p.key != nil {
		sp = setFor(*p.key)
	}
	select {
	case <-p.exited:
		sp = nil
	default:
	}
	if len(fds) != 3 || sp == nil {
		closeFDs(fds)
		p.killGroup()
		return false
	}
	_ = unix.SetNonblock(fds[1], false)
	p.stdin = os.NewFile(uintptr(fds[0]), "store stdin")
	p.setStdout(os.NewFile(uintptr(fds[1]), "store stdout"))
	p.spareStderr = os.NewFile(uintptr(fds[2]), "store stderr")
	p.closeOnce = sync.Once{}
	p.nextID, p.ended, p.broken = req.NextID, nil, false
	sp.mu.Lock()
	if sp.closed {
		sp.mu.Unlock()
		p.kill()
		_ = p.spareStderr.Close()
		return false
	}
	if ws := sp.waiters[*p.key]; len(ws) > 0 {
		// A worker waits for one under way: this one is ready now.
		ws[0] <- p
		sp.waiters[*p.key] = ws[1:]
	} else {
		sp.ready[*p.key] = append(sp.ready[*p.key], p)
	}
	sp.mu.Unlock()
	sp.returned.Add(1)
	return true
}

// rights returns the file descriptors of a message's SCM_RIGHTS.
func rights(oob []byte) []int {
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob); err == nil {
		for _, m := range msgs {
			if r, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, r...)
			}
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}

// take returns a ready spare of key (nil if none) and reopens the set.
func (sp *Spares) take(key spareKey) *proc {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.closed = false
	// The last one in first: a spare given back has served calls (a
	// JVM's JIT has compiled the store's paths), one started ahead of
	// need has served none.
	for n := len(sp.ready[key]); n > 0; n = len(sp.ready[key]) {
		p := sp.ready[key][n-1]
		sp.ready[key] = sp.ready[key][:n-1]
		select {
		case <-p.exited:
			continue
		default:
			return p
		}
	}
	return nil
}

// fill starts spares of key in the background until keep are ready or
// starting.
func (sp *Spares) fill(key spareKey) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.failed[key] >= maxSpareFailures {
		return
	}
	// At most one start per core at a time: spares compete for the cores
	// with the cases (and with the supervisor's own store processes,
	// whose hello must come within the start timeout).
	// Those workers wait for (claim) do not count.
	ahead := func() int { return sp.starting[key] - len(sp.waiters[key]) }
	for n := len(sp.ready[key]) + ahead(); n < sp.keep && ahead() < runtime.NumCPU(); n++ {
		sp.starting[key]++
		sp.prepares.Add(1)
		go sp.prepare(key)
	}
}

// prepare starts one spare: the process, its hello on a directory of its
// own, and close.
func (sp *Spares) prepare(key spareKey) {
	defer sp.prepares.Done()
	var launched *proc
	p, err := warmSpare(key, func(p *proc) bool {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		launched = p
		sp.warming[p] = true
		return !sp.closed
	})
	sp.started.Add(1)
	sp.mu.Lock()
	delete(sp.warming, launched)
	sp.starting[key]--
	if err != nil {
		sp.failed[key]++
	} else {
		sp.failed[key] = 0
	}
	ws := sp.waiters[key]
	switch {
	case err == nil && !sp.closed && len(ws) > 0:
		// To the worker that has waited longest for it (claim).
		ws[0] <- p
		sp.waiters[key] = ws[1:]
		p = nil
	case err == nil && !sp.closed:
		// At the front: the ones given back are taken first (take).
		sp.ready[key] = append([]*proc{p}, sp.ready[key]...)
		p = nil
	case len(ws) > sp.starting[key]:
		// One fewer under way than workers waiting: the last waiter
		// starts its own.
		ws[len(ws)-1] <- nil
		sp.waiters[key] = ws[:len(ws)-1]
	}
	sp.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// warmSpare starts a process of key's command and takes it through hello
// and close on a scratch directory, removed afterwards (the store let go
// of it at close). It tells launched the process once it runs; false
// from launched stops it there.
func warmSpare(key spareKey, launched func(*proc) bool) (*proc, error) {
	if err := os.MkdirAll(key.TempDir, 0o755); err != nil {
		return nil, err
	}
	scratch, err := os.MkdirTemp(key.TempDir, "spare-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	opts := Options{Command: key.Command, WorkDir: key.WorkDir, Dir: scratch, TempDir: key.TempDir,
		Namespace:    "spare-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		HelloTimeout: time.Duration(key.HelloTimeout) * time.Millisecond, Timeout: time.Duration(key.Timeout) * time.Millisecond}
	p, stderr, err := launch(&opts)
	if err != nil {
		return nil, err
	}
	p.spareStderr = stderr
	p.key = &key
	p.watch("", "", nil, p.reap)
	if !launched(p) {
		p.kill()
		_ = stderr.Close()
		return nil, errors.New("the spares were closed")
	}
	c := &Client{opts: opts}
	ctx := quiet(context.Background())
	res, err := c.hello(ctx, p)
	switch {
	case err != nil:
	case !res.Reopen:
		err = errors.New("the store does not declare reopen")
	case c.check(p, res) != "":
		err = errors.New(c.check(p, res))
	default:
		err = c.roundTrip(ctx, p, "close", struct{}{}, nil, opts.timeout())
	}
	if err != nil {
		p.kill()
		_ = stderr.Close()
		return nil, err
	}
	return p, nil
}

// adopt asks this worker's supervisor (its parent, whose spare service
// listens on addr) for a spare of the client's command; nil when it has
// none or cannot be asked.
func (c *Client) adopt(addr string) *proc {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(c.opts.helloTimeout() + spareAsk))
	tmp, err := absTemp(c.opts)
	if err != nil {
		return nil
	}
	b, _ := json.Marshal(spareRequest{Key: spareKey{Command: c.opts.Command, WorkDir: c.opts.WorkDir, TempDir: tmp,
		HelloTimeout: c.opts.helloTimeout().Milliseconds(), Timeout: c.opts.timeout().Milliseconds()}})
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return nil
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil
	}
	fds := rights(oob[:oobn])
	var r spareReply
	if json.Unmarshal(buf[:n], &r) != nil || r.PID <= 0 || len(fds) != 4 {
		closeFDs(fds)
		return nil
	}
	// Blocking, out of the runtime's poller: stdoutReader waits in poll(2).
	_ = unix.SetNonblock(fds[1], false)
	p := newProc(c.opts.Command, c.opts.WorkDir, r.PID, os.NewFile(uintptr(fds[0]), "store stdin"), os.NewFile(uintptr(fds[1]), "store stdout"))
	p.nextID = r.NextID
	p.spareOf = addr
	p.stderrFD = fds[2]
	pidfd := fds[3]
	p.watch(c.opts.LogDir, c.opts.logPrefix(), os.NewFile(uintptr(fds[2]), "store stderr"), func() error {
		// Not our child: its pidfd says when it has exited; its starter
		// (the supervisor) reaps it, and kills what it left in its group.
		fd := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fd, -1); err != unix.EINTR {
				break
			}
		}
		_ = unix.Close(pidfd)
		return errors.New("exited (a spare: its exit status is the supervisor's, which started it)")
	})
	return p
}

// absTemp is the store processes' TMPDIR, absolute.
func absTemp(o Options) (string, error) {
	tmp, err := filepath.Abs(o.tempDir())
	if err != nil {
		return "", err
	}
	return tmp, nil
}

// giveBack gives a spare this worker took, closed, back to the supervisor
// it came from. Once the request is sent the process is the
// supervisor's: it took the process back, or it still counts it as this
// worker's and kills it when this worker ends (KillAdopted); either way
// the worker lets go of its pipes and never kills it (KillAll included).
// False when the request could not be sent (the caller stops it).
func (c *Client) giveBack(p *proc) bool {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: p.spareOf, Net: "unix"})
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(spareAsk))
	b, _ := json.Marshal(spareRequest{Return: p.pid, NextID: p.nextID})
	if _, _, err := conn.WriteMsgUnix(b, unix.UnixRights(int(p.stdin.(*os.File).Fd()), int(p.stdout.Fd()), p.stderrFD), nil); err != nil {
		return false
	}
	// The supervisor's answer, so that this worker does not end (and
	// have the supervisor kill the process with it) before it was taken.
	buf := make([]byte, 1024)
	_, _ = conn.Read(buf)
	_ = p.stdin.Close()
	p.closeStdout()
	live.Delete(p)
	return true
}
