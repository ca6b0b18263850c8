// Package serverfaults carries out the server faults of a run
// (server-crash, ack-lost, conn-reset) for the supervisor: it kills and
// restarts database servers on their data and drives an embedded
// toxiproxy between the workers and each server. It is kept apart from
// sim/servers so that worker processes do not load the proxy.
package serverfaults

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim"
)

// Server is one database server the supervisor may fault: it can tell
// where the server listens, kill it, and start it again on its data.
// provision builds these for the containers it starts.
type Server struct {
	// Name is "postgres" or "neo4j" (the name a fault action targets).
	Name string
	// Protocol is the wire protocol the fault proxy reads: "postgres" or
	// "bolt".
	Protocol string
	// Addr is the server's host:port now.
	Addr string
	// Kill kills the whole server with SIGKILL and returns once it is
	// dead.
	Kill func(ctx context.Context) error
	// Start starts the killed server again on the same data and returns
	// its host:port (it may change) once it answers a query.
	Start func(ctx context.Context) (string, error)
	// Ping answers once the server answers a query (optional).
	Ping func(ctx context.Context) error
	// PowerLoss, set when the server's data directory is on a lazy mount
	// (faults/lazyfs), throws away what the server wrote there and did
	// not sync; it is called while the server is dead.
	PowerLoss func(lazyfs.Tear) lazyfs.Loss
	// PowerOff, set with PowerLoss, is the instant the mount's power goes
	// (lazyfs.FS.PowerOff): nothing the server changes there afterwards
	// survives the PowerLoss that follows.
	PowerOff func()
	// OnDurable, set with PowerLoss, has a function told of every
	// durable file operation on the server's data mount (nil stops;
	// lazyfs.FS.OnDurable).
	OnDurable func(func(lazyfs.DurableOp))
	// Log returns the last n lines of the server's log (optional).
	Log func(ctx context.Context, n int) string
	// Disk, set with PowerLoss, arms disk errors (EIO on an fsync, a
	// full disk, a slow fsync) on the server's data mount.
	Disk lazyfs.DiskErrors
	// Pause stops every process of the server (SIGSTOP: the container's
	// cgroup frozen) and Resume lets them go on (SIGCONT); set for the
	// containers crashmatrix started (server-pause).
	Pause, Resume func(ctx context.Context) error
	// SetClock sets the server's clock offset from the true time (0: the
	// true time again); set when the server's processes read a clock
	// crashmatrix can move (clock-jump). NoClock says why not otherwise.
	SetClock func(ctx context.Context, offset time.Duration) error
	NoClock  string
}

// Crashable says whether the server can be killed and started again: a
// server the user runs can only when they gave the commands to.
func (s *Server) Crashable() bool { return s.Kill != nil && s.Start != nil }

// Supervisor carries out server faults for the simulator
// (sim.ServerFaults): it owns an embedded toxiproxy with a stable proxy in
// front of each server, a proxy per case run, and a loopback HTTP
// endpoint the workers ask for faults at.
type Supervisor struct {
	proxy   *toxiproxy.ApiServer
	ctrl    *http.Server
	ctrlURL string
	log     io.Writer

	mu       sync.Mutex
	servers  map[string]*Server
	stable   map[string]*toxiproxy.Proxy
	cases    map[string]*caseServers
	seq      int
	restarts []RestartTime
	// batches are the crashes waiting for the other cases open at once
	// that crash the same server (sim.ServerCase.Crashes), by server.
	batches map[string]*crashBatch
	// kills counts the kills of each server, from the moment one is
	// decided (before the server goes down).
	kills map[string]int
	// noPower says why the servers' power cannot be cut although each has
	// a PowerLoss (e.g. FUSE is missing); see PowerUntested.
	noPower string
}

// GatherWait bounds how long a case that reached its server-crash window
// waits for the other cases crashing the same server to reach theirs:
// past it the server is killed for those that are there.
const GatherWait = 5 * time.Second

// crashBatch is one kill of a server for the cases waiting at their
// windows.
type crashBatch struct {
	waiters []*crashWaiter
	timer   *time.Timer
	fired   bool
}

// crashWaiter is one case waiting at its window for the kill.
type crashWaiter struct {
	c      *caseServers
	req    sim.ServerFaultRequest
	events int
	saved  []int64
	done   chan error
}

// RestartBudget bounds one kill and restart (sim.ServerRestartBudget).
const RestartBudget = sim.ServerRestartBudget

// RestartTime is one measured server restart: from the kill to the first
// answered query.
type RestartTime struct {
	Server string
	Took   time.Duration
}

// NewSupervisor puts a stable proxy on 127.0.0.1 in front of each server
// and starts the control endpoint. Close stops both.
func NewSupervisor(servers []*Server, log io.Writer) (*Supervisor, error) {
	s := &Supervisor{proxy: newToxiproxy(), log: log, servers: map[string]*Server{}, stable: map[string]*toxiproxy.Proxy{}, cases: map[string]*caseServers{},
		batches: map[string]*crashBatch{}, kills: map[string]int{}}
	for _, srv := range servers {
		p := toxiproxy.NewProxy(s.proxy, "stable-"+srv.Name, "127.0.0.1:0", srv.Addr)
		if err := s.proxy.Collection.Add(p, true); err != nil {
			s.Close()
			return nil, fmt.Errorf("fault proxy for %s: %w", srv.Name, err)
		}
		s.servers[srv.Name], s.stable[srv.Name] = srv, p
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("server fault control endpoint: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /case/{id}", s.handleFault)
	s.ctrl = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.ctrlURL = "http://" + ln.Addr().String()
	go func() { _ = s.ctrl.Serve(ln) }()
	return s, nil
}

// Stable returns the endpoint (host:port on 127.0.0.1) that reaches the
// named server across its restarts.
func (s *Supervisor) Stable(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.stable[name]; p != nil {
		return p.Listen
	}
	return ""
}

// Restarts returns every restart measured so far.
func (s *Supervisor) Restarts() []RestartTime {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RestartTime(nil), s.restarts...)
}

// Close stops the control endpoint and every proxy.
func (s *Supervisor) Close() {
	if s.ctrl != nil {
		_ = s.ctrl.Close()
	}
	_ = s.proxy.Collection.Clear()
}

// Crash kills the named server and starts it again on its data, then
// points every proxy at it; it returns how long the server was gone (kill
// to first answered query).
func (s *Supervisor) Crash(ctx context.Context, name string) (time.Duration, error) {
	srv, err := s.crashable(name)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.kills[name]++
	s.mu.Unlock()
	return s.restart(ctx, name, srv)
}

// crashable returns the named server if it can be crashed, else why not.
// ServerLog returns the last n lines of the named server's log, or why
// there are none.
func (s *Supervisor) ServerLog(ctx context.Context, name string, n int) string {
	s.mu.Lock()
	srv := s.servers[name]
	s.mu.Unlock()
	if srv == nil || srv.Log == nil {
		return fmt.Sprintf("(no log of server %q)", name)
	}
	return srv.Log(ctx, n)
}

func (s *Supervisor) crashable(name string) (*Server, error) {
	s.mu.Lock()
	srv := s.servers[name]
	s.mu.Unlock()
	if srv == nil {
		return nil, fmt.Errorf("no server %q to crash (servers: %s)", name, strings.Join(s.Names(), ", "))
	}
	if !srv.Crashable() {
		return nil, fmt.Errorf("server %s cannot be crashed: no command to kill and start it was given", name)
	}
	return srv, nil
}

// restart kills srv and starts it again (the caller counted the kill):
// the body of Crash.
func (s *Supervisor) restart(ctx context.Context, name string, srv *Server) (time.Duration, error) {
	t0 := time.Now()
	if err := srv.Kill(ctx); err != nil {
		return 0, fmt.Errorf("kill %s: %w", name, err)
	}
	return s.start(ctx, name, srv, t0)
}

// start starts the killed srv again on its data, records the restart
// (from t0) and points every proxy at it.
func (s *Supervisor) start(ctx context.Context, name string, srv *Server, t0 time.Time) (time.Duration, error) {
	addr, err := srv.Start(ctx)
	if err != nil {
		return 0, fmt.Errorf("restart %s on its data: %w", name, err)
	}
	took := time.Since(t0)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restarts = append(s.restarts, RestartTime{Server: name, Took: took})
	return took, s.repointLocked(name, srv, addr)
}

// repointLocked points every proxy of the named server at addr, where
// the restarted server listens now.
func (s *Supervisor) repointLocked(name string, srv *Server, addr string) error {
	if addr != srv.Addr {
		srv.Addr = addr
		proxies := []*toxiproxy.Proxy{s.stable[name]}
		for _, c := range s.cases {
			proxies = append(proxies, c.proxies[name])
		}
		for _, p := range proxies {
			if p == nil {
				continue
			}
			if err := p.Update(&toxiproxy.Proxy{Listen: p.Listen, Upstream: addr, Enabled: true}); err != nil {
				return fmt.Errorf("point the %s proxy at the restarted server: %w", name, err)
			}
		}
	}
	return nil
}

// Can says whether this supervisor can carry out fault kind k on the named
// server: every server it proxies can lose replies and connections; only a
// crashable one can be crashed.
func (s *Supervisor) Can(k faults.Kind, server string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.untestedLocked(k, server) == ""
}

// Untested says why this supervisor cannot carry out fault kind k on the
// named server ("" when it can): "not tested (why)" in a run's verdict.
func (s *Supervisor) Untested(k faults.Kind, server string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.untestedLocked(k, server)
}

func (s *Supervisor) untestedLocked(k faults.Kind, server string) string {
	srv := s.servers[server]
	switch {
	case srv == nil:
		return "this run has no " + server + " server"
	case !k.IsServer():
		return string(k) + " is not a server fault"
	case k == faults.ServerCrash && !srv.Crashable():
		return server + " cannot be crashed: no command to kill and start it was given"
	case k == faults.ServerPause && (srv.Pause == nil || srv.Resume == nil):
		return server + " cannot be stopped and resumed: it is not a container crashmatrix started (a server given by DSN/URI)"
	case k == faults.ClockJump && srv.SetClock == nil:
		return cmp.Or(srv.NoClock, server+"'s clock cannot be moved: it is not a container crashmatrix started")
	}
	return ""
}

// Kills implements sim.ServerFaults: how many times the named server was
// killed (and restarted) so far.
func (s *Supervisor) Kills(server string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kills[server]
}

// Direct implements sim.ServerFaults: where each server listens now.
func (s *Supervisor) Direct() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.servers))
	for name, srv := range s.servers {
		out[name] = srv.Addr
	}
	return out
}

// Names lists the servers the supervisor can fault, sorted.
func (s *Supervisor) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.namesLocked()
}

func (s *Supervisor) namesLocked() []string {
	var out []string
	for n := range s.servers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// OpenCase implements sim.ServerFaults: a proxy per server for the case
// run, and the URL its workers ask for faults at.
func (s *Supervisor) OpenCase(_ context.Context, sc sim.ServerCase) (sim.CaseServers, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	c := &caseServers{s: s, sc: sc, key: fmt.Sprintf("c%d", s.seq), proxies: map[string]*toxiproxy.Proxy{}, armed: map[string]string{},
		own: map[string]map[string]*toxiproxy.Proxy{}}
	for name, srv := range s.servers {
		p := toxiproxy.NewProxy(s.proxy, c.key+"-"+name, "127.0.0.1:0", srv.Addr)
		if err := s.proxy.Collection.Add(p, true); err != nil {
			c.closeLocked()
			return nil, fmt.Errorf("fault proxy for %s of case %s: %w", name, sc.ID, err)
		}
		c.proxies[name] = p
	}
	s.cases[c.key] = c
	return c, nil
}

// caseServers are one case run's proxies and faults.
type caseServers struct {
	s       *Supervisor
	sc      sim.ServerCase
	key     string
	proxies map[string]*toxiproxy.Proxy
	// own are the proxies of the workers that have their own
	// (WorkerEndpoints, under s.mu): worker -> server -> proxy.
	own map[string]map[string]*toxiproxy.Proxy

	mu       sync.Mutex
	armed    map[string]string // toxic name -> latch id, on proxy "server/toxic"
	restarts []check.Restart
	n        int
	// atWindow: the case asked for its server crash (under s.mu).
	atWindow bool
	// held are the faults holding a worker's request (server-pause,
	// partition, clock-jump) not yet healed.
	held []*heldFault
}

func (c *caseServers) Endpoints() map[string]string {
	out := map[string]string{sim.EndpointControl: c.s.ctrlURL + "/case/" + c.key}
	for name, p := range c.proxies {
		out[name] = p.Listen
	}
	return out
}

func (c *caseServers) StopFaults() {
	c.healAll()
	c.mu.Lock()
	armed := c.armed
	c.armed = map[string]string{}
	c.mu.Unlock()
	for key, id := range armed {
		server, toxic, _ := strings.Cut(key, "/")
		if p := c.proxies[server]; p != nil {
			_ = p.Toxics.RemoveToxic(context.Background(), toxic)
		}
		dropLatch(id)
	}
}

func (c *caseServers) Restarts() []check.Restart {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]check.Restart(nil), c.restarts...)
}

func (c *caseServers) Close() {
	c.StopFaults()
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.closeLocked()
}

func (c *caseServers) closeLocked() {
	for _, p := range c.proxies {
		_ = c.s.proxy.Collection.Remove(p.Name)
	}
	for _, ps := range c.own {
		for _, p := range ps {
			_ = c.s.proxy.Collection.Remove(p.Name)
		}
	}
	delete(c.s.cases, c.key)
	// A batch may have been waiting for this case only.
	if b := c.s.batches[c.sc.Crashes]; b != nil && c.s.allAtWindowLocked(c.sc.Crashes) {
		go c.s.fire(c.sc.Crashes, b)
	}
}

// allAtWindowLocked says whether every open case that crashes server has
// asked for its crash.
func (s *Supervisor) allAtWindowLocked(server string) bool {
	for _, c := range s.cases {
		if c.sc.Crashes == server && !c.atWindow {
			return false
		}
	}
	return true
}

// crashTogether kills the server for the case once every open case that
// crashes the same server reached its window (or GatherWait after the
// first did), with one restart for all of them; each gets its own restart
// record and I9 snapshot.
func (c *caseServers) crashTogether(req sim.ServerFaultRequest, server string) error {
	events, saved, err := c.sc.Acknowledged()
	if err != nil {
		return fmt.Errorf("read the history before the kill: %w", err)
	}
	w := &crashWaiter{c: c, req: req, events: events, saved: saved, done: make(chan error, 1)}
	s := c.s
	s.mu.Lock()
	b := s.batches[server]
	if b == nil {
		b = &crashBatch{}
		s.batches[server] = b
		b.timer = time.AfterFunc(GatherWait, func() { s.fire(server, b) })
	}
	b.waiters = append(b.waiters, w)
	c.atWindow = true
	ready := s.allAtWindowLocked(server)
	s.mu.Unlock()
	if ready {
		s.fire(server, b)
	}
	return <-w.done
}

// fire kills and restarts server once for the batch's cases.
func (s *Supervisor) fire(server string, b *crashBatch) {
	s.mu.Lock()
	if b.fired {
		s.mu.Unlock()
		return
	}
	b.fired = true
	b.timer.Stop()
	if s.batches[server] == b {
		delete(s.batches, server)
	}
	waiters := b.waiters
	s.kills[server]++        // no case joins this wave from now on
	srv := s.servers[server] // crashable: fault checked before the case joined
	s.mu.Unlock()
	// Not a request's context: a worker that gives up (or is killed as
	// hung) must not leave a server half restarted.
	ctx, cancel := context.WithTimeout(context.Background(), RestartBudget)
	defer cancel()
	took, err := s.restart(ctx, server, srv)
	together := ""
	if len(waiters) > 1 {
		together = fmt.Sprintf(", one kill for %d cases each at its window", len(waiters))
	}
	for _, w := range waiters {
		if err != nil {
			w.done <- err
			continue
		}
		c := w.c
		rs := check.Restart{Server: server, Point: string(w.req.Point), Worker: w.req.Worker, Took: took, Events: w.events, SavedPlans: w.saved}
		// Read the stores before any worker writes again: what a write
		// acknowledged before the kill must be there now (I9).
		if snap, err := c.sc.Snapshot(ctx); err != nil {
			rs.SnapshotErr = err.Error()
		} else {
			rs.Snapshot = snap
		}
		c.mu.Lock()
		c.restarts = append(c.restarts, rs)
		c.mu.Unlock()
		c.record(w.req, fmt.Sprintf("%s killed (SIGKILL) and restarted on its data%s: first answered query %s after the kill", server, together, took.Round(time.Millisecond)), "")
		w.done <- nil
	}
}

// record appends what the supervisor did to the case's history, under the
// name of the worker that hit the fault.
func (c *caseServers) record(req sim.ServerFaultRequest, detail, errMsg string) {
	h, err := history.Open(c.sc.History, req.Worker, req.Phase, func() int64 { return time.Now().UnixMilli() })
	if err != nil {
		fmt.Fprintf(c.s.log, "server faults: case %s: %v\n", c.sc.ID, err)
		return
	}
	defer h.Close()
	act := req.Action
	h.Append(history.Record{Kind: history.Server, Point: req.Point, Fault: &act, Note: detail, Err: errMsg})
}

func (s *Supervisor) handleFault(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	c := s.cases[r.PathValue("id")]
	s.mu.Unlock()
	if c == nil {
		http.Error(w, "no such case run (it ended?)", http.StatusNotFound)
		return
	}
	var req sim.ServerFaultRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	act := req.Action
	var err error
	if !act.Kind.IsServer() {
		err = fmt.Errorf("%s is not a server fault", act)
	} else {
		// Not the request's context: a worker that gives up (or is killed
		// as hung) must not leave a server half restarted.
		ctx, cancel := context.WithTimeout(context.Background(), RestartBudget)
		err = c.fault(ctx, req, act)
		cancel()
	}
	if err != nil {
		c.record(req, "", err.Error())
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// fault carries out one server fault for the case.
func (c *caseServers) fault(ctx context.Context, req sim.ServerFaultRequest, act faults.Action) error {
	p := c.proxies[act.Server]
	if p == nil {
		return fmt.Errorf("%s: this run has no %s server (servers: %s)", req.Action, act.Server, strings.Join(c.s.Names(), ", "))
	}
	switch act.Kind {
	case faults.ServerCrash:
		if _, err := c.s.crashable(act.Server); err != nil {
			return err
		}
		return c.crashTogether(req, act.Server)
	case faults.ServerPause, faults.Partition, faults.ClockJump:
		return c.hold(ctx, req, act)
	case faults.AckLost, faults.ConnReset:
		c.mu.Lock()
		c.n++
		name := fmt.Sprintf("%s-%d", act.Kind, c.n)
		c.mu.Unlock()
		id, _ := newLatch(func(detail string) { c.record(req, act.Server+": "+detail, "") })
		body := map[string]any{"name": name, "type": ToxicAckLost, "stream": "downstream", "toxicity": 1.0,
			"attributes": map[string]any{"latch": id, "protocol": c.s.servers[act.Server].Protocol}}
		if act.Kind == faults.ConnReset {
			body["type"], body["stream"] = ToxicConnReset, "upstream"
			body["attributes"] = map[string]any{"latch": id}
		}
		b, _ := json.Marshal(body)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(string(b))); err != nil {
			dropLatch(id)
			return fmt.Errorf("arm %s on the %s proxy: %w", act.Kind, act.Server, err)
		}
		c.mu.Lock()
		c.armed[act.Server+"/"+name] = id
		c.mu.Unlock()
		return nil
	}
	return errors.New("unreachable")
}
