package sim

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
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
)

// CaseEnv locates one case's data in a backend. Every process of a case
// opens the backend with the same CaseEnv and must reach the same data.
type CaseEnv struct {
	// Dir is a directory private to the case (embedded backends keep their
	// files here).
	Dir string `json:"dir"`
	// Namespace is unique per case; server backends scope keys by it.
	Namespace string `json:"namespace"`
	// Mutant names a backend-level mutant, or is empty.
	Mutant string `json:"mutant,omitempty"`
	// Servers, when the supervisor may fault the servers, maps a server
	// name to the host:port of the case's own fault proxy in front of it,
	// and EndpointControl to the URL server faults are asked for at.
	Servers map[string]string `json:"servers,omitempty"`
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
	// Close releases what the backend holds across cases (may be nil).
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
	backends   = map[string]BackendFactory{
		"sqlite": func(BackendSpec) (Backend, error) { return SQLiteBackend(), nil },
		"memory": func(BackendSpec) (Backend, error) { return MemoryBackend(), nil },
	}
)

// RegisterBackend makes a named backend available to workers and the CLI.
func RegisterBackend(name string, f BackendFactory) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	backends[name] = f
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

// SQLiteBackend is the embedded default: one SQLite file per case, durable
// across a process kill. In the in-process mode the shared handle is a
// SQLite memory database (sqlite.OpenMemory): the same engine, schema and
// transactions, and, as a process kill leaves the file with every
// committed transaction and nothing else, a simulated crash leaves the
// memory database the same way.
func SQLiteBackend() Backend {
	return Backend{
		Name:     "sqlite",
		Embedded: true,
		OpenShared: func(_ context.Context, env CaseEnv) (reference.Stores, error) {
			return sqlite.OpenMemory(memoryName(env.Dir), sqlite.Options{CreateInsteadOfMerge: env.Mutant == MutantCreateNotMerge})
		},
		Open: func(_ context.Context, env CaseEnv) (reference.Stores, error) {
			if err := os.MkdirAll(env.Dir, 0o755); err != nil {
				return reference.Stores{}, err
			}
			return sqlite.Open(filepath.Join(env.Dir, "crashmatrix.db"), sqlite.Options{CreateInsteadOfMerge: env.Mutant == MutantCreateNotMerge})
		},
		OpenPlanSave: func(_ context.Context, env CaseEnv) (PlanSaveStores, error) {
			if err := os.MkdirAll(env.Dir, 0o755); err != nil {
				return PlanSaveStores{}, err
			}
			s, err := plansave.OpenSQLite(env.Dir, env.Mutant != MutantNoUniqueConstraint)
			if err != nil {
				return PlanSaveStores{}, err
			}
			return PlanSaveStores{Checkpoints: s, Plans: s, Closer: s}, nil
		},
	}
}

// MemoryBackend keeps everything in the opening process's memory: a
// restarted worker finds nothing. It is expected to fail certification.
func MemoryBackend() Backend {
	return Backend{
		Name:     "memory",
		Volatile: true,
		Open: func(context.Context, CaseEnv) (reference.Stores, error) {
			return memory.New(memory.Options{}), nil
		},
		OpenPlanSave: func(context.Context, CaseEnv) (PlanSaveStores, error) {
			m := plansave.NewMemory()
			return PlanSaveStores{Checkpoints: m, Plans: m}, nil
		},
	}
}

// memoryName turns a case directory into a memory database name unique in
// the process.
func memoryName(dir string) string {
	return strings.NewReplacer("/", "_", "?", "_", "#", "_").Replace(fmt.Sprintf("crashmatrix-%d%s", os.Getpid(), dir))
}
