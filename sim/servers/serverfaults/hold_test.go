package serverfaults

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim"
)

// lineServer is a fake server: every request line is answered with an
// autocommit UPDATE's reply, and the lines are kept in the order they
// arrived.
type lineServer struct {
	ln   net.Listener
	mu   sync.Mutex
	seen []string
	// thawed is closed while the server runs; a frozen server answers
	// nothing until thawed (Server.Pause, Resume of a fake server).
	thawed chan struct{}
}

func (s *lineServer) freeze() {
	s.mu.Lock()
	s.thawed = make(chan struct{})
	s.mu.Unlock()
}

func (s *lineServer) thaw() {
	s.mu.Lock()
	close(s.thawed)
	s.mu.Unlock()
}

func (s *lineServer) running() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.thawed
}

func newLineServer(t *testing.T) *lineServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &lineServer{ln: ln, thawed: make(chan struct{})}
	close(s.thawed)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					<-s.running()
					s.mu.Lock()
					s.seen = append(s.seen, strings.TrimSpace(l))
					s.mu.Unlock()
					_, _ = c.Write(append(complete("UPDATE 1"), ready('I')...))
				}
			}(c)
		}
	}()
	return s
}

func (s *lineServer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// roundTrip sends a line on c and reads its reply (an UPDATE's CommandComplete
// and ReadyForQuery).
func roundTrip(t *testing.T, c net.Conn, line string) {
	t.Helper()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	want := len(complete("UPDATE 1")) + len(ready('I'))
	if _, err := io.ReadFull(c, make([]byte, want)); err != nil {
		t.Fatalf("reply to %q: %v", line, err)
	}
}

// holdCase opens a case run on a supervisor of srv whose clock moves are
// counted.
func holdCase(t *testing.T, srv *Server) (*caseServers, *atomic.Int32) {
	s, err := NewSupervisor([]*Server{srv}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	moved := new(atomic.Int32)
	cs, err := s.OpenCase(context.Background(), sim.ServerCase{ID: "h", History: filepath.Join(t.TempDir(), "history.jsonl"),
		PastLease: func() (time.Duration, time.Duration) { moved.Add(1); return 1100 * time.Millisecond, 0 }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cs.Close)
	return cs.(*caseServers), moved
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

func armAt(t *testing.T, c *caseServers, k faults.Kind) {
	t.Helper()
	act := faults.Action{Kind: k, Hit: 1, Server: "postgres"}
	if err := c.fault(context.Background(), sim.ServerFaultRequest{Worker: "fault", Point: faults.BeforeStateCommit, Action: act}, act); err != nil {
		t.Fatal(err)
	}
}

// serverRecords are the case's server records so far.
func serverRecords(t *testing.T, c *caseServers) []history.Record {
	t.Helper()
	h, err := history.Read(c.sc.History)
	if err != nil {
		t.Fatal(err)
	}
	var out []history.Record
	for _, r := range h {
		if r.Kind == history.Server {
			out = append(out, r)
		}
	}
	return out
}

// waitRecords waits until the case has n server records.
func waitRecords(t *testing.T, c *caseServers, n int) []history.Record {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if rs := serverRecords(t, c); len(rs) >= n {
			return rs
		}
	}
	t.Fatalf("the case has %d server records, want %d", len(serverRecords(t, c)), n)
	return nil
}

// release writes the release file of the fault worker (phase 0): the
// case's next worker is done.
func release(t *testing.T, c *caseServers) {
	t.Helper()
	if err := os.WriteFile(sim.ReleaseFile(c.sc.History, 0), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sendAsync writes line on c and reads its reply in the background.
func sendAsync(c net.Conn, line string) <-chan error {
	replied := make(chan error, 1)
	go func() {
		if _, err := c.Write([]byte(line + "\n")); err != nil {
			replied <- err
			return
		}
		_, err := io.ReadFull(c, make([]byte, len(complete("UPDATE 1"))+len(ready('I'))))
		replied <- err
	}()
	return replied
}

func noReplyYet(t *testing.T, replied <-chan error, when string) {
	t.Helper()
	select {
	case err := <-replied:
		t.Fatalf("the holder got its reply %s (%v)", when, err)
	case <-time.After(200 * time.Millisecond):
	}
}

func hasAll(t *testing.T, note string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
}

// A partition holds the connections open at the window (the worker's)
// both ways while a connection opened since (another worker's) reaches the
// server and commits; it is recorded as in effect once the worker's
// request is held and the case's clock moved past the lease, and heals
// once the case's next worker is done: the held request reaches the server
// after the other's, its reply back to the worker.
func TestPartitionHoldsTheWorkersConnectionsWhileAnotherCommits(t *testing.T) {
	fake := newLineServer(t)
	c, moved := holdCase(t, &Server{Name: "postgres", Protocol: "postgres", Addr: fake.ln.Addr().String()})
	holder := dial(t, c.Endpoints()["postgres"])
	roundTrip(t, holder, "holder-before")
	armAt(t, c, faults.Partition)
	replied := sendAsync(holder, "holder-commit")
	rs := waitRecords(t, c, 1)
	if rs[0].Err != "" || moved.Load() != 1 {
		t.Fatalf("record %+v, clock moved %d times: want the partition in effect, the clock moved once", rs[0], moved.Load())
	}
	hasAll(t, rs[0].Note, "1 connection(s) held silent", "next request (14 bytes)", "past the lease")
	if l := fake.lines(); len(l) != 1 {
		t.Fatalf("server saw %v during the partition: the holder's request must be held", l)
	}
	noReplyYet(t, replied, "during the partition")
	other := dial(t, c.Endpoints()["postgres"])
	roundTrip(t, other, "other-commit")
	noReplyYet(t, replied, "before the next worker was done")
	release(t, c)
	if err := <-replied; err != nil {
		t.Fatalf("the holder's reply after the partition healed: %v", err)
	}
	if l := fake.lines(); strings.Join(l, ",") != "holder-before,other-commit,holder-commit" {
		t.Fatalf("server saw %v: want the held request after the other connection's commit", l)
	}
	rs = waitRecords(t, c, 2)
	hasAll(t, rs[1].Note, "another connection committed a write (UPDATE 1)", "healed once the next worker was done", "1 chunk(s), 14 bytes held")
}

// A hold that saw no request of the worker's held nothing: it is
// recorded as a failure (the case is not exercised), never as a fault that
// took effect.
func TestAHoldThatHeldNothingDidNotFire(t *testing.T) {
	fake := newLineServer(t)
	c, _ := holdCase(t, &Server{Name: "postgres", Protocol: "postgres", Addr: fake.ln.Addr().String()})
	armAt(t, c, faults.Partition)
	c.StopFaults()
	if rs := serverRecords(t, c); len(rs) != 1 || !strings.Contains(rs[0].Err, "held no request") {
		t.Fatalf("records %+v: want the partition recorded as holding nothing", rs)
	}
}

// server-pause stops the server at the window, lets the worker's request
// go out to it, moves the case's clock past the lease, and resumes it at
// least FreezeFor later; the worker gets the reply to that request, and
// its next request is held until the case's next worker is done, so that
// the holder stays parked while it takes over. A server it cannot stop is
// refused.
func TestServerPauseStopsTheServerPastTheLease(t *testing.T) {
	fake := newLineServer(t)
	var mu sync.Mutex
	var calls []string
	var stoppedAt, resumedAt time.Time
	note := func(what string, at *time.Time, do func()) func(context.Context) error {
		return func(context.Context) error {
			do()
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, what)
			*at = time.Now()
			return nil
		}
	}
	c, moved := holdCase(t, &Server{Name: "postgres", Protocol: "postgres", Addr: fake.ln.Addr().String(),
		Pause: note("pause", &stoppedAt, fake.freeze), Resume: note("resume", &resumedAt, fake.thaw)})
	holder := dial(t, c.Endpoints()["postgres"])
	roundTrip(t, holder, "before")
	armAt(t, c, faults.ServerPause)
	if err := <-sendAsync(holder, "commit"); err != nil {
		t.Fatalf("the reply to the request in flight at the stop: %v", err)
	}
	mu.Lock()
	got, froze := strings.Join(calls, ","), resumedAt.Sub(stoppedAt)
	mu.Unlock()
	if got != "pause,resume" || moved.Load() != 1 || froze < FreezeFor {
		t.Fatalf("calls %v, resumed %s after the stop, clock moved %d times: want the server paused, then resumed %s later at least, the clock moved once",
			got, froze, moved.Load(), FreezeFor)
	}
	next := sendAsync(holder, "next")
	rs := waitRecords(t, c, 1)
	if rs[0].Err != "" {
		t.Fatalf("record %+v", rs[0])
	}
	hasAll(t, rs[0].Note, "stopped (SIGSTOP", "next request (7 bytes)", "past the lease", "resumed (SIGCONT)", "the worker's next request held")
	noReplyYet(t, next, "before the next worker was done")
	if l := fake.lines(); strings.Join(l, ",") != "before,commit" {
		t.Fatalf("server saw %v: the worker's request after the one in flight must be held", l)
	}
	release(t, c)
	if err := <-next; err != nil {
		t.Fatalf("the holder's reply after the release: %v", err)
	}
	hasAll(t, waitRecords(t, c, 2)[1].Note, "healed once the next worker was done")
	if why := c.s.Untested(faults.ServerPause, "postgres"); why != "" {
		t.Fatalf("a server with Pause and Resume: untested %q", why)
	}
	s, err := NewSupervisor([]*Server{{Name: "postgres", Protocol: "postgres", Addr: fake.ln.Addr().String()}}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Can(faults.ServerPause, "postgres") || s.Can(faults.ClockJump, "postgres") || !s.Can(faults.Partition, "postgres") {
		t.Fatal("a server given by address: want partition only, of the faults that hold a request")
	}
}
