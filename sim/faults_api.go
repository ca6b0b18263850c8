package sim

import (
	"github.com/crashmatrix/crashmatrix/sim/casefaults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// The faults a case arms outside its workers (power loss, disk errors,
// durable-step kills, server faults) live in sim/casefaults; these names
// keep the API that server backends, commands and users' tests know as
// sim's.

type (
	// ServerFaults is casefaults.ServerFaults.
	ServerFaults = casefaults.ServerFaults
	// ServerCase is casefaults.ServerCase.
	ServerCase = casefaults.ServerCase
	// CaseServers is casefaults.CaseServers.
	CaseServers = casefaults.CaseServers
	// ServerPower is casefaults.ServerPower.
	ServerPower = casefaults.ServerPower
	// ServerPowerLoss is casefaults.ServerPowerLoss.
	ServerPowerLoss = casefaults.ServerPowerLoss
	// ServerDurable is casefaults.ServerDurable.
	ServerDurable = casefaults.ServerDurable
	// ServerDisk is casefaults.ServerDisk.
	ServerDisk = casefaults.ServerDisk
	// WorkerEndpoints is casefaults.WorkerEndpoints.
	WorkerEndpoints = casefaults.WorkerEndpoints
)

// PowerLossNotTested is casefaults.PowerLossNotTested.
func PowerLossNotTested(why string) string { return casefaults.PowerLossNotTested(why) }

// CleanStaleMounts is casefaults.CleanStaleMounts.
func CleanStaleMounts() ([]string, error) { return casefaults.CleanStaleMounts() }

// StoreMethods is casefaults.StoreMethods.
func StoreMethods() []string { return casefaults.StoreMethods() }

// ReleaseFile is casefaults.ReleaseFile.
func ReleaseFile(history string, phase int) string { return casefaults.ReleaseFile(history, phase) }

// PowerLossUntested says why this runner cannot cut the power, or "" when
// it can: reports print it as "power loss: not tested (why)".
func (r *Runner) PowerLossUntested() string { return r.outside.PowerLossUntested() }

// PowerLossSelection adds the power-loss column to sel where the runner
// can test it (and the torn-write column where sel asks for its kind or,
// on an embedded backend, for no kind), and otherwise returns what the
// report must say instead ("power loss: not tested (why)"); asking for
// either kind where it cannot run is an error.
func (r *Runner) PowerLossSelection(sel *catalogue.Selection) (untested string, err error) {
	return r.outside.PowerLossSelection(sel)
}

// WatchesDurableSteps reports whether the runner's cases can kill a worker
// right after a durable step (Step.Durable): worker processes whose
// stores keep their files on the case's lazy mount.
func (r *Runner) WatchesDurableSteps() bool { return r.outside.DurableSweepable() }
