package worker

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

// Backend-level mutants a Backend honours through CaseEnv.Mutant.
const (
	// MutantCreateNotMerge makes the graph writer CREATE on every upsert.
	MutantCreateNotMerge = "create-instead-of-merge"
	// MutantNoUniqueConstraint drops UNIQUE(owner, operation_id) from the
	// plan table of System B.
	MutantNoUniqueConstraint = "no-unique-constraint"
	// MutantLostCommitIsFailure makes the PostgreSQL stores report a write
	// whose reply was lost as a definite failure ("failed, retry as new")
	// instead of an unknown outcome.
	MutantLostCommitIsFailure = "lost-commit-is-failure"
	// MutantRenewIgnoresHolder makes the SQL stores' (SQLite, PostgreSQL)
	// lease renewal match the document and a live expiry but not the
	// holder and its token: a stale holder renews the lease another holder
	// was granted and goes on writing.
	MutantRenewIgnoresHolder = "renew-ignores-holder"
	// MutantServerClockLease makes the PostgreSQL lock provider take and
	// renew leases on the server's own clock (clock_timestamp()) instead
	// of the caller's: caught when that clock jumps (clock-jump).
	MutantServerClockLease = "server-clock-lease"
	// MutantSynchronousOff opens the embedded SQLite stores of System A with
	// PRAGMA synchronous=OFF: they survive every process kill and must fail
	// under power loss.
	MutantSynchronousOff = "synchronous-off"
	// MutantTwoTransactionCreate makes the PostgreSQL operation store
	// commit a new operation's row and its plan in two transactions, with
	// no window declared between them: caught where a crash falls between
	// the two, the server killed right after its first commit's WAL sync
	// (--backend containers, the servers' durable-step sweep).
	MutantTwoTransactionCreate = "two-transaction-create"
)

// CaseEnv locates one case's data in a backend. Every process of a case
// opens the backend with the same CaseEnv and must reach the same data.
type CaseEnv struct {
	// Dir is a directory private to the case (embedded backends keep their
	// files here); it may not exist yet: Open creates it.
	Dir string `json:"dir"`
	// Logs is a directory private to the case for what the harness writes
	// about its stores (store-cmd: each store process's stderr): outside
	// Dir and off the case's lazy mount, so that nothing of the harness is
	// ever taken for the store's data. It may not exist yet.
	Logs string `json:"logs,omitempty"`
	// TempDir is the TMPDIR of every store process (adapters/storeproc),
	// a worker's and the supervisor's alike: a folder of the run's, outside
	// Dir, the same for every case. It may not exist yet.
	TempDir string `json:"tempDir,omitempty"`
	// Namespace is unique per case; server backends scope keys by it.
	Namespace string `json:"namespace"`
	// Mutant names a backend-level mutant, or is empty.
	Mutant string `json:"mutant,omitempty"`
	// Servers, when the supervisor may fault the servers, maps a server
	// name to the host:port of the case's own fault proxy in front of it,
	// and EndpointControl to the URL server faults are asked for at.
	Servers map[string]string `json:"servers,omitempty"`
	// ReadOnly tells Open the stores are opened only to be read back for
	// the check, once every process of the case has ended (the
	// supervisor's snapshot): a backend may then open them read-only,
	// without what a writer sets up, as long as it reads what Open
	// would. Never set for a worker.
	ReadOnly bool `json:"-"`
}

// PlanSaveStores are the two stores of System B.
type PlanSaveStores struct {
	Checkpoints plansave.CheckpointStore
	Plans       plansave.PlanStore
	Closer      io.Closer
}

// Backend opens the stores the reference service runs on.
type Backend struct {
	// Name is what reports call the backend.
	Name string
	// Open opens System A's stores for a case.
	Open func(ctx context.Context, env CaseEnv) (reference.Stores, error)
	// OpenPlanSave opens System B's stores for a case; nil means the
	// backend does not certify System B.
	OpenPlanSave func(ctx context.Context, env CaseEnv) (PlanSaveStores, error)
	// Close releases what the backend holds across cases (may be nil);
	// Runner.CloseShared calls it, and the backend must stay usable after.
	Close func() error
	// Volatile backends lose everything a process held when it dies: in
	// the in-process mode each worker opens them afresh. Every other
	// backend keeps what it committed, so in-process workers share one
	// open handle (a crash happens between steps, never inside a
	// transaction, so nothing uncommitted is shared).
	Volatile bool
	// Embedded backends keep a case's data under CaseEnv.Dir: removing
	// the directory removes the data.
	Embedded bool
	// OpenShared, when set, opens the handle the in-process mode shares
	// between a case's simulated processes instead of Open: an embedded
	// backend can keep it in memory, since a simulated crash never ends
	// the process (Config.InProcessFiles keeps Open).
	OpenShared func(ctx context.Context, env CaseEnv) (reference.Stores, error)
	// Simulated marks a model of a store rather than a store: a simulated
	// durable store (every call that returned is committed and survives a
	// simulated crash, nothing else exists) that makes a protocol-only
	// exploration fast (explore --sim-store). It runs in process only,
	// each case on a fresh one, and never certifies anything: NewRunner
	// takes it only with Config.SimulatedStore set, and its findings are
	// replayed on a real store before they are reported as real.
	Simulated bool
	// Local backends' store calls, in the in-process mode, run in this
	// process and wait on nothing outside it (no server, no other program
	// or process): that mode runs them under a context that cannot end,
	// checking it before each call instead (callGate.detached).
	Local bool
	// Diagnose, when set, says what the backend's servers are doing now:
	// the supervisor asks when a worker of a case hangs past its deadline,
	// before it kills it (sessions waiting for a lock and on whom, long
	// transactions, and their statements). Its first line is a summary;
	// ctx ends 10 s after the ask (the servers may be the ones hung).
	Diagnose func(ctx context.Context, env CaseEnv) string
	// ChildProcesses: a worker's stores run in processes of their own
	// (store-cmd), each leading its own process group in the worker's
	// session. The supervisor then ends a worker's whole session, after it
	// exits and whenever it kills it, so that nothing they started
	// outlives the case (a look through /proc; other backends' workers
	// start no process, and their process group is all there is).
	ChildProcesses bool
	// SpawnsNoted: with ChildProcesses, the worker notes each process it
	// starts in its starts file before it starts it (NoteSpawn), and the
	// supervisor looks through /proc only after a worker that noted one
	// (Spawned): one that took its store processes from the supervisor's
	// spares (which die with its session all the same) started none.
	SpawnsNoted bool
	// StartTimeout, when positive, bounds how long a worker's stores may
	// take to start (store-cmd: a store process until its hello reply):
	// the time a worker spends opening its stores, up to this much per
	// open, does not count towards its deadline, so that a slow start (a
	// JVM on a busy machine) is never the reason a case is undecided.
	StartTimeout time.Duration
}

// BackendSpec names a backend so that a worker process can open it.
type BackendSpec struct {
	Name string            `json:"name"`
	Args map[string]string `json:"args,omitempty"`
}

// BackendFactory builds a backend from its spec.
type BackendFactory func(spec BackendSpec) (Backend, error)

var (
	backendsMu sync.Mutex
	// backends are registered by the packages that provide them
	// (sim/embedded: sqlite and memory; sim/servers: postgres), so that
	// sim compiles no store.
	backends = map[string]BackendFactory{}
)

// RegisterBackend makes a named backend available to workers and the CLI.
func RegisterBackend(name string, f BackendFactory) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	backends[name] = f
}

// BackendNames are the registered backends' names, sorted.
func BackendNames() []string {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ResolveBackend builds the named backend.
func ResolveBackend(spec BackendSpec) (Backend, error) {
	backendsMu.Lock()
	f, ok := backends[spec.Name]
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	backendsMu.Unlock()
	if !ok {
		sort.Strings(names)
		return Backend{}, fmt.Errorf("unknown backend %q (known: %v)", spec.Name, names)
	}
	return f(spec)
}

// ServerBacked says whether the backend's stores live in servers (not
// embedded, not in the process's memory).
func (b Backend) ServerBacked() bool { return !b.Embedded && !b.Volatile }
