package sim

import (
	"context"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// The worker side and the backend registry live in sim/worker, below the
// runner, so that a worker binary links no supervisor. The names below keep
// the API that backends, worker binaries and users' tests know as sim's.

// Backend-level mutants a Backend honours through CaseEnv.Mutant.
const (
	MutantCreateNotMerge       = worker.MutantCreateNotMerge
	MutantNoUniqueConstraint   = worker.MutantNoUniqueConstraint
	MutantLostCommitIsFailure  = worker.MutantLostCommitIsFailure
	MutantRenewIgnoresHolder   = worker.MutantRenewIgnoresHolder
	MutantServerClockLease     = worker.MutantServerClockLease
	MutantSynchronousOff       = worker.MutantSynchronousOff
	MutantTwoTransactionCreate = worker.MutantTwoTransactionCreate
)

// Names of sim/worker, kept in sim.
const (
	EndpointControl     = worker.EndpointControl
	ServerRestartBudget = worker.ServerRestartBudget
	ServiceProtocolExit = worker.ServiceProtocolExit
	StoppedHoldersFile  = worker.StoppedHoldersFile
)

type (
	// Adopter is worker.Adopter.
	Adopter = worker.Adopter
	// Backend is worker.Backend.
	Backend = worker.Backend
	// BackendFactory is worker.BackendFactory.
	BackendFactory = worker.BackendFactory
	// BackendSpec is worker.BackendSpec.
	BackendSpec = worker.BackendSpec
	// CaseEnv is worker.CaseEnv.
	CaseEnv = worker.CaseEnv
	// PlanSaveStores is worker.PlanSaveStores.
	PlanSaveStores = worker.PlanSaveStores
	// ServerFaultRequest is worker.ServerFaultRequest.
	ServerFaultRequest = worker.ServerFaultRequest
	// ServiceSpec is worker.ServiceSpec.
	ServiceSpec = worker.ServiceSpec
	// WorkerOptions is worker.WorkerOptions.
	WorkerOptions = worker.WorkerOptions
	// WorkerSpec is worker.WorkerSpec.
	WorkerSpec = worker.WorkerSpec
)

// RegisterBackend is worker.RegisterBackend.
func RegisterBackend(name string, f BackendFactory) { worker.RegisterBackend(name, f) }

// BackendNames is worker.BackendNames.
func BackendNames() []string { return worker.BackendNames() }

// ResolveBackend is worker.ResolveBackend.
func ResolveBackend(spec BackendSpec) (Backend, error) { return worker.ResolveBackend(spec) }

// RegisterAdopter is worker.RegisterAdopter.
func RegisterAdopter(a Adopter) { worker.RegisterAdopter(a) }

// WorkerBinary is worker.WorkerBinary.
func WorkerBinary(backend string) string { return worker.WorkerBinary(backend) }

// WorkerMain is worker.WorkerMain.
func WorkerMain(prog string, args []string) int { return worker.WorkerMain(prog, args) }

// RunWorker is worker.RunWorker.
func RunWorker(ctx context.Context, spec WorkerSpec, b Backend, opt WorkerOptions) error {
	return worker.RunWorker(ctx, spec, b, opt)
}

// RunWorkerFile is worker.RunWorkerFile.
func RunWorkerFile(ctx context.Context, path string, backend Backend) error {
	return worker.RunWorkerFile(ctx, path, backend)
}

// ReadWorkerSpec is worker.ReadWorkerSpec.
func ReadWorkerSpec(path string) (WorkerSpec, error) { return worker.ReadWorkerSpec(path) }

// ProcessWorkerOptions is worker.ProcessWorkerOptions.
func ProcessWorkerOptions() WorkerOptions { return worker.ProcessWorkerOptions() }

// KillSelf is worker.KillSelf.
func KillSelf(h faults.Hit) { worker.KillSelf(h) }

// InWorkerProcess is worker.InWorkerProcess.
func InWorkerProcess() bool { return worker.InWorkerProcess() }

// ServiceDir is worker.ServiceDir.
func ServiceDir(env CaseEnv) string { return worker.ServiceDir(env) }

// OpID is worker.OpID.
func OpID(space, op string) string { return worker.OpID(space, op) }

// ThreadID is worker.ThreadID.
func ThreadID(space, thread string) string { return worker.ThreadID(space, thread) }
