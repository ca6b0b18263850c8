package properties_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
)

// testStoresSurviveKills is the crash certification of a store: in your
// own package it is a top-level TestXxx function of a _test.go file. Its
// worker processes are re-executions of the test binary that run this
// function up to CertifyCrashSafety, and Open is called in each of them:
// every worker of a case must reach the same data, here one file under
// the case's own folder (which may not exist yet).
func testStoresSurviveKills(t *testing.T) {
	properties.CertifyCrashSafety(t, properties.Backend{
		Name: "mystore",
		Open: func(ctx context.Context, env properties.CaseEnv) (reference.Stores, error) {
			if err := os.MkdirAll(env.Dir, 0o755); err != nil {
				return reference.Stores{}, err
			}
			return sqlite.Open(filepath.Join(env.Dir, "store.db"), sqlite.Options{})
		},
	}, properties.CrashOptions{
		// One window and one fault kind, for a run of seconds; without
		// CrashOptions the whole matrix runs.
		Points: []faults.Point{faults.BeforeGraphWrite},
		Kinds:  []faults.Kind{faults.Crash},
	})
}

// The crash matrix with real process kills: at each crash window a worker
// is killed with SIGKILL, a new one resubmits what was unfinished,
// recovery runs, and the invariants are checked against what the stores
// hold. A store without System B's stores (no OpenPlanSave) has those
// cases listed as not applicable. A run that does not certify fails the
// test with the matrix, every broken invariant and the folder of its
// reports.
//
// The example is compiled, not run: CertifyCrashSafety needs the
// *testing.T of a top-level test, whose binary it re-executes as its
// workers. TestExamplesRun (properties) runs testStoresSurviveKills.
func ExampleCertifyCrashSafety() {
	// In your package: func TestStoresSurviveKills(t *testing.T), with the
	// body of testStoresSurviveKills above; go test runs it.
}
