package casefaults

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/execmode"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// ServerFaults lets the supervisor fault the database servers of a server
// backend (server-crash, ack-lost, conn-reset); sim/servers implements it
// with the containers it started and an embedded fault proxy. It is
// defined here, where the supervisor consumes it, so that sim does not
// depend on the container libraries.
type ServerFaults interface {
	// OpenCase gives one run of a case its own way to the servers (a
	// fault proxy per server) and the address its workers ask for server
	// faults at.
	OpenCase(ctx context.Context, sc ServerCase) (CaseServers, error)
	// Kills says how many times the named server was killed so far.
	Kills(server string) int
	// Direct gives each server's own host:port now (server name ->
	// host:port), bypassing every proxy: the way to the servers of a case
	// that arms no server fault. A restart may move a server, so it is
	// asked for each case, under the gate that keeps such cases apart
	// from restarts.
	Direct() map[string]string
}

// ServerCase is what the server faults of one case run need to know.
type ServerCase struct {
	// ID names the case run (unique in the supervisor).
	ID string
	// Crashes names the server the case crashes at its window, if any.
	// The cases open at once that crash the same server crash it
	// together: the supervisor kills it once when all of them reached
	// their windows (or a few seconds after the first did).
	Crashes string
	// History is the case's history file; the supervisor appends what it
	// did to the servers (a restart, a reply it dropped) to it.
	History string
	// Snapshot reads the case's stores; it is taken right after a server
	// restart, before any worker writes again (invariant I9).
	Snapshot func(ctx context.Context) (check.Snapshot, error)
	// Acknowledged says what the history has acknowledged so far: how
	// many service events it holds and the plan row ids saves returned.
	// It is asked at a server kill.
	Acknowledged func() (events int, savedPlans []int64, err error)
	// PastLease moves the case's clock past its workers' leases (a server
	// frozen or cut off longer than a lease takes that long on the clock
	// the leases use): it returns how far it moved the harness clock, and
	// how long the fault must still hold in wall time (all of it when the
	// workers keep the wall clock).
	PastLease func() (moved, hold time.Duration)
}

// CaseServers are one case run's endpoints and server faults.
type CaseServers interface {
	// Endpoints are what the workers reach the servers through
	// (worker.CaseEnv.Servers): server name -> host:port, and EndpointControl ->
	// the URL they ask for server faults at.
	Endpoints() map[string]string
	// StopFaults disarms every proxy fault still armed: faults stop
	// before the final recovery.
	StopFaults()
	// Restarts lists the server restarts of the case so far.
	Restarts() []check.Restart
	// Close removes the case's proxies.
	Close()
}

// OpenServers opens the case's server faults when the run has them: the
// workers' endpoints go into env, and the case holds the servers shared,
// or exclusively when it crashes one. unlock releases what it took.
func (f *Faults) OpenServers(ctx context.Context, c catalogue.Case, cx execmode.Case, env *worker.CaseEnv, space, history string) (CaseServers, func(), error) {
	if f.run.ServerFaults == nil || f.run.InProcess {
		if k, ok := serverFaultOf(c); ok {
			return nil, func() {}, fmt.Errorf("case arms a server fault (%s) but this run cannot fault servers: it needs a server backend whose servers crashmatrix started (--backend containers, with server faults on) and real worker processes", k)
		}
		return nil, func() {}, nil
	}
	crashes := CrashedServer(c)
	if f.isServerPowerLoss(c) || durableServer(c) != "" || actsOnWholeServer(c) {
		// A power loss kills every server, a durable-step kill one, a
		// pause or a clock jump holds one whole: the case runs alone, its
		// workers through proxies that follow the restarted server.
		crashes = powerWave
	}
	f.servers.acquire(crashes, f.run.ServerFaults.Kills)
	unlock := f.servers.release
	if _, ok := serverFaultOf(c); !ok && crashes != powerWave {
		// No server fault to carry out: the workers reach the servers
		// themselves, not through a proxy that would only copy bytes
		// (half the supervisor's CPU in a containers matrix).
		env.Servers = f.run.ServerFaults.Direct()
		return nil, unlock, nil
	}
	snapEnv := *env
	crashesServer := crashes
	if crashes == powerWave {
		crashesServer = ""
	}
	cs, err := f.run.ServerFaults.OpenCase(ctx, ServerCase{ID: space, History: history, Crashes: crashesServer,
		PastLease: f.pastLease(c, history),
		Snapshot: func(ctx context.Context) (check.Snapshot, error) {
			h, err := cx.History()
			if err != nil {
				return check.Snapshot{}, err
			}
			s, _, err := cx.Snapshot(ctx, c, snapEnv, space, h)
			return s, err
		},
		Acknowledged: func() (int, []int64, error) {
			h, err := cx.History()
			if err != nil {
				return 0, nil, err
			}
			obs := f.run.Observe(h, c, space)
			var saved []int64
			for _, t := range obs.Threads {
				saved = append(saved, t.ReturnedIDs...)
			}
			return len(obs.Events), saved, nil
		}})
	if err != nil {
		unlock()
		return nil, func() {}, fmt.Errorf("server faults: %w", err)
	}
	env.Servers = cs.Endpoints()
	return cs, func() { cs.Close(); unlock() }, nil
}

// serverGate lets cases share the servers. The cases that crash no
// server run together. The cases that crash server S run in waves apart
// from every other case, since a restart would fail the workers of a case
// that does not expect it: a wave takes new cases until S is first killed
// (the supervisor kills it once for the cases of the wave at their
// windows: see ServerCase.Crashes), then drains before the next begins.
type serverGate struct {
	mu   sync.Mutex
	cond *sync.Cond
	// crashes is the group running: "" (no crash), or a server's name;
	// n how many of its cases run; kills the server's kill count when
	// the wave began.
	crashes string
	n       int
	kills   int
}

// acquire waits until the case may run; kills counts the kills of a
// server so far (nil when no case crashes one).
func (g *serverGate) acquire(crashes string, kills func(string) int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	// A power loss kills every server: its case runs alone (powerWave).
	for g.n > 0 && (crashes == powerWave || g.crashes != crashes || crashes != "" && kills(crashes) != g.kills) {
		g.cond.Wait()
	}
	if g.n == 0 && crashes != "" {
		g.kills = kills(crashes)
	}
	g.crashes = crashes
	g.n++
}

func (g *serverGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n--; g.n == 0 && g.cond != nil {
		g.cond.Broadcast()
	}
}

// serverFaultOf returns a server fault the case arms, if any.
func serverFaultOf(c catalogue.Case) (faults.Action, bool) {
	for _, st := range c.Steps {
		for _, a := range st.Arms {
			if a.Kind.IsServer() {
				return a, true
			}
		}
	}
	return faults.Action{}, false
}

// CrashedServer names the server a case crashes ("" when none).
func CrashedServer(c catalogue.Case) string {
	if a, ok := serverFaultOf(c); ok && a.Kind == faults.ServerCrash {
		return a.Server
	}
	return ""
}

// ServerFaultDone reports whether the supervisor recorded that the server
// fault worker armed at p took effect (a restart, a dropped reply, a reset
// connection).
func ServerFaultDone(h history.Log, worker string, p faults.Point) bool {
	for _, r := range h {
		if r.Kind == history.Server && r.Point == p && r.Worker == worker && r.Err == "" {
			return true
		}
	}
	return false
}
