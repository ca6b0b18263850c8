package properties_test

import (
	"path/filepath"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
)

// TestConformanceMemory runs every conformance suite against the in-memory
// adapter.
func TestConformanceMemory(t *testing.T) {
	properties.Stores(t, func(t *testing.T) reference.Stores { return memory.New(memory.Options{}) })
}

// TestConformanceSQLite runs every conformance suite against the SQLite
// adapter, one fresh database file per subtest.
func TestConformanceSQLite(t *testing.T) {
	properties.Stores(t, func(t *testing.T) reference.Stores {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "db"), sqlite.Options{})
		if err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
		return s
	})
}
