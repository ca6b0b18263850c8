package postgres

import (
	"context"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/reference"
)

// OpenReadOnly reads what Open wrote, lists leases, the server refuses
// every write through it ("read-only transaction"), and a schema without
// crashmatrix's tables is not opened.
func TestOpenReadOnlyReadsAndRefusesWrites(t *testing.T) {
	ctx := context.Background()
	dsn := schemaDSN(t)
	storetest.ReadOnly(t, openDSN(t, dsn, false), func() reference.Stores {
		ro, err := OpenReadOnly(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		return ro
	}, "read-only transaction")
	if _, err := OpenReadOnly(ctx, schemaDSN(t)); err == nil {
		t.Fatal("a schema without crashmatrix's tables opened")
	}
}
