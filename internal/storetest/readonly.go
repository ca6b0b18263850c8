package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

// ReadOnly checks a read-only handle (what `crashmatrix snapshot` reads
// through) on what rw wrote: it lists the space's leases with their
// tokens, a released one with its last token and no holder, and every
// write through it fails with an error containing refusal. rw must be
// empty; openRO opens the read-only handle on the same data.
func ReadOnly(t *testing.T, rw reference.Stores, openRO func() reference.Stores, refusal string) {
	t.Helper()
	ctx := context.Background()
	l, ok, err := rw.Locks.TryAcquire(ctx, "s", "d1", "h1", 1000, 10)
	if err != nil || !ok {
		t.Fatal(err)
	}
	Must(t, rw.Locks.Release(ctx, l))
	_, _, err = rw.Locks.TryAcquire(ctx, "s", "d2", "h2", 1000, 500)
	Must(t, err)
	ro := openRO()
	defer ro.Close()
	lister, ok := ro.Locks.(interface {
		ListLeases(context.Context, string) ([]reference.Lease, error)
	})
	if !ok {
		t.Fatalf("%T cannot list leases", ro.Locks)
	}
	leases, err := lister.ListLeases(ctx, "s")
	Must(t, err)
	want := []reference.Lease{{Space: "s", DocumentID: "d1", Token: 1}, {Space: "s", DocumentID: "d2", Holder: "h2", Token: 1, ExpiresAt: 1500}}
	if len(leases) != 2 || leases[0] != want[0] || leases[1] != want[1] {
		t.Fatalf("leases %+v, want %+v", leases, want)
	}
	err = ro.States.RecordVersion(ctx, reference.DocumentState{Space: "s", DocumentID: "d", Revision: 1, OperationID: "o", Status: reference.DocActive})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), refusal) {
		t.Fatalf("a write through the read-only handle: %v, want an error containing %q", err, refusal)
	}
	if _, _, err := ro.Locks.TryAcquire(ctx, "s", "d3", "h3", 1000, 10); err == nil {
		t.Fatal("a lease was taken through the read-only handle")
	}
}
