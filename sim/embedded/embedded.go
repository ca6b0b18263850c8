// Package embedded registers the simulator's embedded backends: "sqlite",
// the durable default (one SQLite file per case, nothing to start), and
// "memory", which forgets everything when its process dies and is expected
// to fail certification. Importing it is what makes the names resolvable;
// sim itself compiles no store.
package embedded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
	"github.com/crashmatrix/crashmatrix/sim/worker"
	msqlite "modernc.org/sqlite"
)

func init() {
	worker.RegisterBackend("sqlite", func(worker.BackendSpec) (worker.Backend, error) { return SQLite(), nil })
	worker.RegisterBackend("memory", func(worker.BackendSpec) (worker.Backend, error) { return Memory(), nil })
	msqlite.RegisterConnectionHook(numberCommits)
}

// numberCommits installs SQLite's commit hook on every connection of the
// driver, so that each write transaction of a worker process passes the
// faults.StoreCommit pseudo-point before it commits: a random kill can be
// placed at the j-th commit, inside a store call, and replayed there. The
// hook never vetoes a commit; outside a worker process it does nothing.
func numberCommits(c msqlite.ExecQuerierContext, _ string) error {
	if h, ok := c.(msqlite.HookRegisterer); ok {
		h.RegisterCommitHook(func() int32 { faults.AtCommit(); return 0 })
	}
	return nil
}

// SQLite is the embedded default: one SQLite file per case, durable
// across a process kill. In the in-process mode the shared handle is a
// SQLite memory database (sqlite.OpenMemory): the same engine, schema and
// transactions, and, as a process kill leaves the file with every
// committed transaction and nothing else, a simulated crash leaves the
// memory database the same way.
func SQLite() worker.Backend {
	return worker.Backend{
		Name:     "sqlite",
		Embedded: true,
		Local:    true,
		OpenShared: func(_ context.Context, env worker.CaseEnv) (reference.Stores, error) {
			return sqlite.OpenMemory(memoryName(env.Dir), sqlite.Options{CreateInsteadOfMerge: env.Mutant == worker.MutantCreateNotMerge,
				RenewIgnoresHolder: env.Mutant == worker.MutantRenewIgnoresHolder})
		},
		Open: func(_ context.Context, env worker.CaseEnv) (reference.Stores, error) {
			if err := os.MkdirAll(env.Dir, 0o755); err != nil {
				return reference.Stores{}, err
			}
			if env.ReadOnly { // the supervisor's snapshot
				return sqlite.OpenForCheck(filepath.Join(env.Dir, "crashmatrix.db"), sqliteOptions(env))
			}
			return sqlite.Open(filepath.Join(env.Dir, "crashmatrix.db"), sqliteOptions(env))
		},
		OpenPlanSave: func(_ context.Context, env worker.CaseEnv) (worker.PlanSaveStores, error) {
			if err := os.MkdirAll(env.Dir, 0o755); err != nil {
				return worker.PlanSaveStores{}, err
			}
			s, err := sqlite.OpenPlanSave(env.Dir, env.Mutant != worker.MutantNoUniqueConstraint)
			if err != nil {
				return worker.PlanSaveStores{}, err
			}
			return worker.PlanSaveStores{Checkpoints: s, Plans: s, Closer: s}, nil
		},
	}
}

// sqliteOptions are the SQLite stores' options of a case: its backend
// mutant.
func sqliteOptions(env worker.CaseEnv) sqlite.Options {
	return sqlite.Options{CreateInsteadOfMerge: env.Mutant == worker.MutantCreateNotMerge,
		SynchronousOff: env.Mutant == worker.MutantSynchronousOff, RenewIgnoresHolder: env.Mutant == worker.MutantRenewIgnoresHolder}
}

// Memory keeps everything in the opening process's memory: a
// restarted worker finds nothing. It is expected to fail certification.
func Memory() worker.Backend {
	return worker.Backend{
		Name:     "memory",
		Volatile: true,
		Local:    true,
		Open: func(context.Context, worker.CaseEnv) (reference.Stores, error) {
			return memory.New(memory.Options{}), nil
		},
		OpenPlanSave: func(context.Context, worker.CaseEnv) (worker.PlanSaveStores, error) {
			m := plansave.NewMemory()
			return worker.PlanSaveStores{Checkpoints: m, Plans: m}, nil
		},
	}
}

// SimStoreName is what reports call the simulated durable store.
const SimStoreName = "sim-store"

// SimStore is the simulated durable store of explore --sim-store: the
// memory stores (adapters/memory, the model the conformance suites are
// written against) shared by a case's simulated processes. Every store
// call is one atomic commit, and a simulated crash (which never ends the
// process) leaves every call that returned and nothing else: the crash
// semantics of a durable store, without its engine, so exploring the
// protocol costs a fraction of a SQLite run. It is no store: it is not
// registered under a name (certify, run and the matrix cannot select it),
// sim.NewRunner takes it only with Config.SimulatedStore, and explore
// replays what it finds on SQLite before calling a finding real. Of the
// backend mutants it models create-instead-of-merge only.
func SimStore() worker.Backend {
	return worker.Backend{
		Name:      SimStoreName,
		Simulated: true,
		Local:     true,
		Open: func(_ context.Context, env worker.CaseEnv) (reference.Stores, error) {
			switch env.Mutant {
			case "", worker.MutantCreateNotMerge:
			default:
				return reference.Stores{}, fmt.Errorf("the simulated store does not model the mutant %q (only %s): explore it without --sim-store", env.Mutant, worker.MutantCreateNotMerge)
			}
			return memory.New(memory.Options{CreateInsteadOfMerge: env.Mutant == worker.MutantCreateNotMerge}), nil
		},
		OpenPlanSave: func(context.Context, worker.CaseEnv) (worker.PlanSaveStores, error) {
			m := plansave.NewMemory()
			return worker.PlanSaveStores{Checkpoints: m, Plans: m}, nil
		},
	}
}

// memoryName turns a case directory into a memory database name unique in
// the process.
func memoryName(dir string) string {
	return strings.NewReplacer("/", "_", "?", "_", "#", "_").Replace(fmt.Sprintf("crashmatrix-%d%s", os.Getpid(), dir))
}
