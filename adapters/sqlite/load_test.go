package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/reference"
)

// OpenReadOnly reads what Open wrote, lists leases, refuses every write
// (SQLite: "readonly"), and does not open a missing file.
func TestOpenReadOnlyReadsAndRefusesWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	storetest.ReadOnly(t, st, func() reference.Stores {
		ro, err := OpenReadOnly(path)
		if err != nil {
			t.Fatal(err)
		}
		return ro
	}, "readonly")
	if _, err := OpenReadOnly(filepath.Join(t.TempDir(), "none.db")); err == nil {
		t.Fatal("a missing file opened")
	}
}
