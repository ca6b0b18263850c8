package serverfaults

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim"
)

// fakeSupervisor supervises one fake server, "postgres", whose kills it
// counts (its start takes 50ms); the supervisor is closed with the test.
func fakeSupervisor(t *testing.T) (*Supervisor, *atomic.Int32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	kills := new(atomic.Int32)
	srv := &Server{Name: "postgres", Protocol: "postgres", Addr: ln.Addr().String(),
		Kill: func(context.Context) error { kills.Add(1); return nil },
		Start: func(context.Context) (string, error) {
			time.Sleep(50 * time.Millisecond)
			return ln.Addr().String(), nil
		}}
	s, err := NewSupervisor([]*Server{srv}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, kills
}

func openCrashCase(t *testing.T, s *Supervisor, id string) *caseServers {
	hist := filepath.Join(t.TempDir(), "history.jsonl")
	cs, err := s.OpenCase(context.Background(), sim.ServerCase{ID: id, History: hist, Crashes: "postgres",
		Snapshot:     func(context.Context) (check.Snapshot, error) { return check.Snapshot{}, nil },
		Acknowledged: func() (int, []int64, error) { return 0, nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return cs.(*caseServers)
}

func crashAt(c *caseServers, p faults.Point) error {
	act := faults.Action{Kind: faults.ServerCrash, Hit: 1, Server: "postgres"}
	return c.fault(context.Background(), sim.ServerFaultRequest{Worker: "fault", Point: p, Action: act}, act)
}

// The cases open at once that crash the same server share one kill: it
// happens once all of them reached their windows, and each records the
// restart it saw.
func TestCasesCrashingOneServerShareItsKill(t *testing.T) {
	s, kills := fakeSupervisor(t)
	cases := []*caseServers{openCrashCase(t, s, "a"), openCrashCase(t, s, "b"), openCrashCase(t, s, "c")}
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 200 * time.Millisecond) // they reach their windows one after another
			if err := crashAt(c, faults.BeforeStateCommit); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := kills.Load(); n != 1 || s.Kills("postgres") != 1 {
		t.Fatalf("%d kills (Kills says %d) for three cases open at once, want 1", n, s.Kills("postgres"))
	}
	if took := time.Since(start); took >= GatherWait {
		t.Fatalf("took %s: the kill waited for the gather timeout though every case had reached its window", took)
	}
	for _, c := range cases {
		if rs := c.Restarts(); len(rs) != 1 || rs[0].Server != "postgres" {
			t.Errorf("case %s restarts %+v, want one of postgres", c.sc.ID, rs)
		}
		h, err := history.Read(c.sc.History)
		if err != nil || len(h) != 1 || !strings.Contains(h[0].Note, "one kill for 3 cases each at its window") {
			t.Errorf("case %s history %+v (%v): want the shared restart recorded", c.sc.ID, h, err)
		}
		c.Close()
	}
}

// A case that ends without reaching its window (its worker failed before)
// does not hold the others' kill back.
func TestACaseThatEndsDoesNotHoldTheKill(t *testing.T) {
	s, kills := fakeSupervisor(t)
	a, b := openCrashCase(t, s, "a"), openCrashCase(t, s, "b")
	done := make(chan error, 1)
	go func() { done <- crashAt(a, faults.BeforeCompleted) }()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	b.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(GatherWait / 2):
		t.Fatalf("the kill still waits %s after the other case ended", time.Since(start))
	}
	if kills.Load() != 1 {
		t.Fatalf("%d kills, want 1", kills.Load())
	}
	a.Close()
}

// Direct is where each server listens now: after a restart that moved the
// server, the new address, not the one it started on.
func TestDirectFollowsARestart(t *testing.T) {
	addrs := []string{"127.0.0.1:5001", "127.0.0.1:5002"}
	srv := &Server{Name: "postgres", Protocol: "postgres", Addr: addrs[0],
		Kill:  func(context.Context) error { return nil },
		Start: func(context.Context) (string, error) { return addrs[1], nil }}
	s, err := NewSupervisor([]*Server{srv}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d := s.Direct(); len(d) != 1 || d["postgres"] != addrs[0] {
		t.Fatalf("Direct before the restart = %v, want postgres at %s", d, addrs[0])
	}
	if s.Stable("postgres") == addrs[0] {
		t.Fatal("the stable endpoint is the server itself, not a proxy")
	}
	if _, err := s.Crash(context.Background(), "postgres"); err != nil {
		t.Fatal(err)
	}
	if d := s.Direct(); d["postgres"] != addrs[1] {
		t.Fatalf("Direct after the restart = %v, want postgres at %s", d, addrs[1])
	}
}
