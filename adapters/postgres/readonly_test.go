package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

// OpenReadOnly reads what Open wrote (leases with their tokens, released
// ones too), the server refuses every write through it, and a database
// without the schema is not opened.
func TestOpenReadOnlyReadsAndRefusesWrites(t *testing.T) {
	ctx := context.Background()
	dsn := schemaDSN(t)
	st := openDSN(t, dsn, false)
	l, ok, err := st.Locks.TryAcquire(ctx, "s", "d1", "h1", 1000, 10)
	if err != nil || !ok {
		t.Fatal(err)
	}
	if err := st.Locks.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Locks.TryAcquire(ctx, "s", "d2", "h2", 1000, 500); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	leases, err := ro.Locks.(interface {
		ListLeases(context.Context, string) ([]reference.Lease, error)
	}).ListLeases(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	want := []reference.Lease{{Space: "s", DocumentID: "d1", Token: 1}, {Space: "s", DocumentID: "d2", Holder: "h2", Token: 1, ExpiresAt: 1500}}
	if len(leases) != 2 || leases[0] != want[0] || leases[1] != want[1] {
		t.Fatalf("leases %+v, want %+v", leases, want)
	}
	err = ro.States.RecordVersion(ctx, reference.DocumentState{Space: "s", DocumentID: "d", Revision: 1, OperationID: "o", Status: reference.DocActive})
	if err == nil || !strings.Contains(err.Error(), "read-only transaction") {
		t.Fatalf("a write through the read-only pool: %v", err)
	}
	if _, _, err := ro.Locks.TryAcquire(ctx, "s", "d3", "h3", 1000, 10); err == nil {
		t.Fatal("a lease was taken through the read-only pool")
	}
	if _, err := OpenReadOnly(ctx, schemaDSN(t)); err == nil {
		t.Fatal("a schema without crashmatrix's tables opened")
	}
}
