package storeproc_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/reference"
)

// badStore starts testdata/badstore.py in mode.
func badStore(t *testing.T, mode string, timeout time.Duration) (*storeproc.Client, error) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	cmd := python(t, "", filepath.Join(filepath.Dir(file), "testdata", "badstore.py"), mode)
	c, err := storeproc.Start(context.Background(), storeproc.Options{Command: cmd, Dir: t.TempDir(), Timeout: timeout, HelloTimeout: 20 * time.Second})
	if c != nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// TestBadInputIsAClearError drives a store process that breaks the
// protocol each way and checks the error names the request, what came back
// and the store's stderr, and never waits past the deadline.
func TestBadInputIsAClearError(t *testing.T) {
	cases := []struct {
		mode    string
		atStart bool
		want    []string // substrings of the error
	}{
		{"exit-at-start", true, []string{"hello #0", "ended", "exit status 3", "fatal: cannot open /nonexistent/store.db"}},
		{"wrong-version", true, []string{"hello #0", `speaks protocol "crashmatrix-store/0"`, `crashmatrix speaks "crashmatrix-store/1"`}},
		{"not-protocol", false, []string{"ops.get #1", "not a JSON object", "got: DEBUG handling ops.get", "badstore got ops.get"}},
		{"unasked", false, []string{"ops.get #1", "request 42, which is not the request in progress (1)", `got: {"id": 42`}},
		{"late", false, []string{"ops.get #1", "no reply within 300ms", "badstore got ops.get"}},
		{"exit-mid-request", false, []string{"ops.get #1", "ended while the request waited", "exit status 139", "badstore: segfault, say"}},
		{"missing-field", false, []string{"ops.get #1", `field "operation" is missing`}},
		{"wrong-type", false, []string{"ops.get #1", "result field operation.operationId: want a JSON string, got a JSON number"}},
		{"bad-step", false, []string{"ops.get #1", "crash window step 2, want 1"}},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			client, err := badStore(t, c.mode, 300*time.Millisecond)
			if !c.atStart {
				if err != nil {
					t.Fatalf("start: %v", err)
				}
				_, err = client.Stores().Ops.Get(context.Background(), "op-1")
			}
			var pe *storeproc.ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("got %v (%T), want a *storeproc.ProtocolError", err, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if !strings.Contains(pe.Stderr, "badstore starting in mode "+c.mode) {
				t.Errorf("the error keeps no stderr tail: %q", pe.Stderr)
			}
		})
	}
}

// TestStoreErrorsMapToReferenceErrors checks the two sides of section 5:
// a definite not_found is reference.ErrNotFound, an unknown outcome is
// reported as one (reference.IsOutcomeUnknown) and stays retryable.
func TestStoreErrorsMapToReferenceErrors(t *testing.T) {
	c, err := badStore(t, "not-found", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Stores().Ops.Get(context.Background(), "op-1")
	if !errors.Is(err, reference.ErrNotFound) || reference.IsOutcomeUnknown(err) {
		t.Errorf("not_found: got %v, want ErrNotFound, definite", err)
	}
	c, err = badStore(t, "unknown-outcome", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Stores().Ops.Claim(context.Background(), "op-1", "h", 1, 10)
	if !reference.IsOutcomeUnknown(err) || !reference.IsRetryable(err) || !strings.Contains(err.Error(), "commit: disk I/O error") {
		t.Errorf("definite false: got %v (unknown %v, retryable %v), want an unknown, retryable outcome", err, reference.IsOutcomeUnknown(err), reference.IsRetryable(err))
	}
}

// TestBlankNamesAreRefusedBeforeSending holds store-protocol.md section 4
// to its word: every string argument that names something is non-blank,
// because crashmatrix refuses a blank one (reference.ErrInvalidArgument)
// without sending it. The store answers every request it gets with an
// error naming it, so a blank that slips through shows. (A blank
// operation id for ops.get and ops.getPlan may also be reference.ErrNotFound,
// as properties.Stores allows of any store.)
func TestBlankNamesAreRefusedBeforeSending(t *testing.T) {
	c, err := badStore(t, "answers-nothing", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, ctx := c.Stores(), context.Background()
	edge := reference.EdgeKey{Source: "a", Type: "R", Target: "b"}
	lease := reference.Lease{Space: "s", DocumentID: "d", Holder: " ", Token: 1, ExpiresAt: 10}
	calls := []struct {
		name string
		call func() error
	}{
		{"ops.get", func() error { _, err := st.Ops.Get(ctx, " "); return err }},
		{"ops.getPlan", func() error { _, err := st.Ops.GetPlan(ctx, ""); return err }},
		{"ops.claim operationId", func() error { _, err := st.Ops.Claim(ctx, "", "h", 1, 10); return err }},
		{"ops.claim holder", func() error { _, err := st.Ops.Claim(ctx, "op", "", 1, 10); return err }},
		{"ops.releaseClaim operationId", func() error { _, err := st.Ops.ReleaseClaim(ctx, "", "h"); return err }},
		{"ops.releaseClaim holder", func() error { _, err := st.Ops.ReleaseClaim(ctx, "op", " "); return err }},
		{"states.findCurrent space", func() error { _, _, err := st.States.FindCurrent(ctx, "", "d"); return err }},
		{"states.findCurrent documentId", func() error { _, _, err := st.States.FindCurrent(ctx, "s", ""); return err }},
		{"states.findByOperationId", func() error { _, _, err := st.States.FindByOperationID(ctx, "s", "d", ""); return err }},
		{"states.remove", func() error { _, err := st.States.Remove(ctx, "s", "", 1); return err }},
		{"states.versions", func() error { _, err := st.States.Versions(ctx, "s", ""); return err }},
		{"states.list", func() error { _, err := st.States.List(ctx, ""); return err }},
		{"states.isReferenced space", func() error { _, err := st.States.IsReferencedByOtherDocument(ctx, "", "d", edge); return err }},
		{"registry.findMatches", func() error { _, err := st.Registry.FindMatches(ctx, "", "Person", []string{"ada"}); return err }},
		{"registry.saveAll", func() error {
			return st.Registry.SaveAll(ctx, "", []reference.EntityRegistration{{NodeID: "n", Type: "Person", CanonicalName: "Ada"}})
		}},
		{"registry.list", func() error { _, err := st.Registry.List(ctx, ""); return err }},
		{"graph.apply", func() error {
			return st.Writer.Apply(ctx, "", reference.Mutation{UpsertNodes: []reference.NodeUpsert{{ID: "n", Label: "Person"}}})
		}},
		{"graph.readRecords", func() error { _, err := st.Writer.ReadRecords(ctx, " "); return err }},
		{"locks.tryAcquire space", func() error { _, _, err := st.Locks.TryAcquire(ctx, "", "d", "h", 1, 10); return err }},
		{"locks.tryAcquire holder", func() error { _, _, err := st.Locks.TryAcquire(ctx, "s", "d", "", 1, 10); return err }},
		{"locks.renew", func() error { _, err := st.Locks.Renew(ctx, lease, 1, 10); return err }},
		{"locks.release", func() error { return st.Locks.Release(ctx, lease) }},
		{"checkpoints.load", func() error { _, _, err := c.Checkpoints().Load(ctx, ""); return err }},
		{"plans.save", func() error { _, err := c.Plans().Save(ctx, "", "op", "q", 1); return err }},
		{"plans.list", func() error { _, err := c.Plans().List(ctx, " "); return err }},
	}
	for _, k := range calls {
		err := k.call()
		switch {
		case err != nil && strings.Contains(err.Error(), "badstore was sent"):
			t.Errorf("%s: a blank name reached the store: %v", k.name, err)
		case strings.HasPrefix(k.name, "ops.get") && errors.Is(err, reference.ErrNotFound):
			// the blank-id convention: an operation named "" is not found
		case !errors.Is(err, reference.ErrInvalidArgument):
			t.Errorf("%s: got %v, want reference.ErrInvalidArgument", k.name, err)
		}
	}
}
