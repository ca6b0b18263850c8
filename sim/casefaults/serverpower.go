package casefaults

import (
	"context"
	"fmt"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs/cut"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// ServerPower is what a server backend's ServerFaults implements when it
// can cut the power of its servers: sim/servers/serverfaults does when
// the containers crashmatrix started keep their data directories on lazy
// mounts (faults/lazyfs, bind-mounted into the containers).
type ServerPower interface {
	// PowerUntested says why the servers cannot be power-failed ("" when
	// they can): a server reached by DSN/URI, FUSE missing.
	PowerUntested() string
	// PowerLoss kills every server (SIGKILL to the whole container),
	// throws away everything their data directories hold that was not
	// synced (torn, as lazyfs.FS.Cut tears: some of its pages or sectors
	// kept), and starts them again on what is left; it returns once
	// each answers a query again.
	PowerLoss(ctx context.Context, tear cut.Tear) (ServerPowerLoss, error)
}

// ServerPowerLoss is what one power loss of the servers did.
type ServerPowerLoss struct {
	// Servers are the servers killed and started again.
	Servers []string
	// Loss is what the lazy mounts threw away (and, torn, kept), summed
	// over the servers' data directories.
	cut.Loss
	// Took is from the kill to every server's first answered query.
	Took time.Duration
}

// powerWave is the serverGate group of the power-loss cases on servers:
// each runs alone, since a power loss kills every server, and the workers
// of any other case running at the time would die mid-flight with them.
const powerWave = "\x00power-loss"

// serverPower returns the runner's ServerPower, if its server faults have
// one.
func (f *Faults) serverPower() (ServerPower, bool) {
	sp, ok := f.run.ServerFaults.(ServerPower)
	return sp, ok && sp != nil
}

// serverPowerUntested says why this runner cannot cut its servers' power
// ("" when it can).
func (f *Faults) serverPowerUntested() string {
	sp, ok := f.serverPower()
	if !ok {
		return fmt.Sprintf("backend %s keeps its data where crashmatrix cannot cut the power: not in files under the case's folder (Backend.Embedded is not set: a Go store whose data lives under worker.CaseEnv.Dir sets it), nor on servers it can kill and whose data directories it holds (servers given by DSN/URI, or containers run with --server-faults=false; --backend containers with its server faults, the default, keeps their data on a lazy mount)", f.run.Backend.Name)
	}
	return sp.PowerUntested()
}

// cutServerPower is the power loss of a server case: every process of the
// case is dead already (AfterWorker), the servers are killed, their
// un-synced writes dropped, and they are started again; the stores are
// then read through the servers (I9), before recovery writes.
func (f *Faults) cutServerPower(ctx context.Context, pc *Power, c catalogue.Case, env worker.CaseEnv, space string, h history.Log, hit history.Record, res *verdict.CaseResult) error {
	loss, err := pc.server.PowerLoss(ctx, tearOf(hit, pc.done))
	if err != nil {
		return fmt.Errorf("power loss at %s: %w", hit.Point, err)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("power loss at %s (worker %s): every process of the case killed, servers %v killed (SIGKILL); %d bytes and %d directory entries of their data directories that were not synced thrown away%s%s; first answered query %s after the kill",
		hit.Point, hit.Worker, loss.Servers, loss.Bytes, loss.Names, res.Lost(loss.Loss), tornNote(loss.Loss), loss.Took.Round(time.Millisecond)))
	pc.tore(hit, loss.Loss)
	rs := check.Restart{Server: "machine (power loss)", Point: string(hit.Point), Worker: hit.Worker, Took: loss.Took, Events: len(h.Events())}
	for _, t := range f.run.Observe(h, c, space).Threads {
		rs.SavedPlans = append(rs.SavedPlans, t.ReturnedIDs...)
	}
	if snap, _, err := f.run.Snapshot(ctx, c, env, space, h); err != nil {
		rs.SnapshotErr = err.Error()
	} else {
		rs.Snapshot = snap
	}
	pc.restarts = append(pc.restarts, rs)
	return nil
}

// isServerPowerLoss reports whether c cuts the power of a server backend
// (a power loss, or a disk error: its case ends in one).
func (f *Faults) isServerPowerLoss(c catalogue.Case) bool {
	return !f.run.Backend.Embedded && (armsPowerLoss(c) || armsDiskFault(c))
}

// ServerDisk is what a server backend's ServerFaults implements when it
// can fail the disk of its servers' data directories (the lazy mounts of
// ServerPower): sim/servers/serverfaults does, on PostgreSQL's.
type ServerDisk interface {
	// ServerDisk returns the disk errors of the servers' data mounts,
	// armed together, or why there are none.
	ServerDisk() (cut.DiskErrors, string)
}

// serverDiskErrors returns the servers' disk errors for a case that arms
// one, or the error that says why there are none.
func (f *Faults) serverDiskErrors() (cut.DiskErrors, error) {
	dm, why := f.serverDisk()
	if why != "" {
		return nil, fmt.Errorf("disk errors: not tested (%s)", why)
	}
	return dm, nil
}

// serverDisk returns the servers' disk errors, or why this runner has
// none.
func (f *Faults) serverDisk() (cut.DiskErrors, string) {
	sd, ok := f.run.ServerFaults.(ServerDisk)
	if !ok || sd == nil {
		return nil, fmt.Sprintf("backend %s's server faults cannot fail its servers' disks (--backend containers with its server faults, the default, can on PostgreSQL's data directory)", f.run.Backend.Name)
	}
	return sd.ServerDisk()
}
