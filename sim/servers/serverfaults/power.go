package serverfaults

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/sim"
)

// NoPower records why the servers' power cannot be cut (PowerUntested
// says so), e.g. that FUSE is missing on this machine.
func (s *Supervisor) NoPower(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noPower = why
}

// PowerUntested implements sim.ServerPower: "" when every server can be
// killed and keeps its data directory on a lazy mount, else why not.
func (s *Supervisor) PowerUntested() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noPower != "" {
		return s.noPower
	}
	if len(s.servers) == 0 {
		return "no server to power-fail"
	}
	for _, name := range s.namesLocked() {
		srv := s.servers[name]
		switch {
		case !srv.Crashable():
			return fmt.Sprintf("server %s was given by DSN/URI and no command kills it: crashmatrix cannot cut its power", name)
		case srv.PowerLoss == nil:
			return fmt.Sprintf("the data directory of server %s is not on a lazy mount (a server given by DSN/URI, or containers started without power loss): crashmatrix cannot drop its un-synced writes", name)
		}
	}
	return ""
}

// PowerLoss implements sim.ServerPower: every server is killed (SIGKILL
// to its container), then each lazy mount drops what was not synced,
// then every server starts again on what is left and the proxies follow
// it. Each server's kill counts as one (Kills).
func (s *Supervisor) PowerLoss(ctx context.Context, tear lazyfs.Tear) (sim.ServerPowerLoss, error) {
	if why := s.PowerUntested(); why != "" {
		return sim.ServerPowerLoss{}, errors.New(why)
	}
	s.mu.Lock()
	names := s.namesLocked()
	srvs := make([]*Server, len(names))
	for i, n := range names {
		srvs[i] = s.servers[n]
		s.kills[n]++
	}
	s.mu.Unlock()
	out := sim.ServerPowerLoss{Servers: names}
	t0 := time.Now()
	// The machine dies at once: every server, then the disks' caches.
	var errs []error
	for i, srv := range srvs {
		if err := srv.Kill(ctx); err != nil {
			errs = append(errs, fmt.Errorf("kill %s: %w", names[i], err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, err
	}
	for _, name := range names {
		loss, err := s.CutServer(name, tear)
		if err != nil {
			return out, err
		}
		out.Add(loss)
	}
	// They start together (Neo4j's JVM takes its time; PostgreSQL need
	// not wait for it).
	addrs := make([]string, len(srvs))
	errs = make([]error, len(srvs))
	var wg sync.WaitGroup
	for i, srv := range srvs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addrs[i], errs[i] = srv.Start(ctx)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("restart %s on what the power loss left: %w", names[i], errs[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return out, err
	}
	out.Took = time.Since(t0)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, srv := range srvs {
		s.restarts = append(s.restarts, RestartTime{Server: names[i], Took: out.Took})
		if err := s.repointLocked(names[i], srv, addrs[i]); err != nil {
			return out, err
		}
	}
	return out, nil
}

// WatchDurable implements sim.ServerDurable: fn hears every durable file
// operation on the named server's data mount (nil stops).
func (s *Supervisor) WatchDurable(name string, fn func(lazyfs.DurableOp)) error {
	srv, err := s.crashable(name)
	if err != nil {
		return err
	}
	if srv.OnDurable == nil {
		return fmt.Errorf("the data directory of server %s is not on a lazy mount (a server given by DSN/URI, or containers started without power loss): its durable steps cannot be seen", name)
	}
	srv.OnDurable(fn)
	return nil
}

// KillServer implements sim.ServerDurable: SIGKILL to the whole server,
// counted as one of its kills; it stays down until StartServer.
func (s *Supervisor) KillServer(ctx context.Context, name string) error {
	srv, err := s.crashable(name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.kills[name]++
	s.mu.Unlock()
	if err := srv.Kill(ctx); err != nil {
		return fmt.Errorf("kill %s: %w", name, err)
	}
	return nil
}

// StartServer implements sim.ServerDurable: the killed server starts again
// on its data, and every proxy follows it.
func (s *Supervisor) StartServer(ctx context.Context, name string) (time.Duration, error) {
	srv, err := s.crashable(name)
	if err != nil {
		return 0, err
	}
	return s.start(ctx, name, srv, time.Now())
}

// ServerDisk implements sim.ServerDisk: the disk errors of every server
// whose data mount can fail (PostgreSQL's; provision arms none on
// Neo4j's), armed together as one machine's disk; or why none can.
func (s *Supervisor) ServerDisk() (lazyfs.DiskErrors, string) {
	if why := s.PowerUntested(); why != "" {
		return nil, why
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ds serverDisks
	for _, name := range s.namesLocked() {
		if d := s.servers[name].Disk; d != nil {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return nil, "no server's data mount can fail (disk errors are armed on PostgreSQL's data directory, and this run has no PostgreSQL started by crashmatrix)"
	}
	return ds, ""
}

// serverDisks are the data mounts of several servers, armed together.
type serverDisks []lazyfs.DiskErrors

func (ds serverDisks) each(fn func(lazyfs.DiskErrors)) {
	for _, d := range ds {
		fn(d)
	}
}

func (ds serverDisks) FailNextSync()     { ds.each(func(d lazyfs.DiskErrors) { d.FailNextSync() }) }
func (ds serverDisks) SetFull(on bool)   { ds.each(func(d lazyfs.DiskErrors) { d.SetFull(on) }) }
func (ds serverDisks) DisarmDisk()       { ds.each(func(d lazyfs.DiskErrors) { d.DisarmDisk() }) }
func (ds serverDisks) BeforeIO(f func()) { ds.each(func(d lazyfs.DiskErrors) { d.BeforeIO(f) }) }
func (ds serverDisks) SlowNextSync(f func(lazyfs.DurableOp)) {
	ds.each(func(d lazyfs.DiskErrors) { d.SlowNextSync(f) })
}

// DiskStats sums what the mounts' disk errors did.
func (ds serverDisks) DiskStats() lazyfs.DiskStats {
	var out lazyfs.DiskStats
	for _, d := range ds {
		st := d.DiskStats()
		out.SyncErrors += st.SyncErrors
		out.NoSpace += st.NoSpace
		out.Dropped += st.Dropped
		out.SlowSyncs += st.SlowSyncs
	}
	return out
}

// PowerOffServer implements sim.ServerDurable: the power of the server's
// data mount goes at this instant (lazyfs.FS.PowerOff), until CutServer.
func (s *Supervisor) PowerOffServer(name string) error {
	srv, err := s.crashable(name)
	if err != nil {
		return err
	}
	if srv.PowerOff == nil || srv.PowerLoss == nil {
		return fmt.Errorf("the data directory of server %s is not on a lazy mount (a server given by DSN/URI, or containers started without power loss): its power cannot be cut", name)
	}
	srv.PowerOff()
	return nil
}

// CutServer implements sim.ServerDurable: what the server (dead) left
// un-synced on its data mount is thrown away, torn as t says, paths named
// "server:path", and the mount's power is back.
func (s *Supervisor) CutServer(name string, t lazyfs.Tear) (lazyfs.Loss, error) {
	srv, err := s.crashable(name)
	if err != nil {
		return lazyfs.Loss{}, err
	}
	if srv.PowerLoss == nil {
		return lazyfs.Loss{}, fmt.Errorf("the data directory of server %s is not on a lazy mount: its power cannot be cut", name)
	}
	loss := srv.PowerLoss(t)
	for j := range loss.Files {
		loss.Files[j].Path = name + ":" + loss.Files[j].Path
	}
	return loss, nil
}

var (
	_ sim.ServerPower   = (*Supervisor)(nil)
	_ sim.ServerDurable = (*Supervisor)(nil)
	_ sim.ServerDisk    = (*Supervisor)(nil)
)
