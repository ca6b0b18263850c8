package boltstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"

	"example.com/boltstore"
)

// The conformance suite, exactly as the store-author guide
// (docs/certify-go-store.md) writes it: a fresh bbolt file per call.
func TestStoresConform(t *testing.T) {
	properties.Stores(t, func(t *testing.T) reference.Stores {
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "store.db"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// The crash matrix with real process kills: every worker process of a case
// opens the same file under the case's directory (which may not exist yet:
// Open creates it). No System B: those cases are not applicable.
func TestStoresSurviveKills(t *testing.T) {
	properties.CertifyCrashSafety(t, properties.Backend{
		Name: "bbolt",
		Open: func(ctx context.Context, env properties.CaseEnv) (reference.Stores, error) {
			return boltstore.Open(filepath.Join(env.Dir, "store.db"))
		},
	})
}
