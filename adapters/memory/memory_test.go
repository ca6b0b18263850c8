package memory

import (
	"context"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

func openMemory(t *testing.T, mutant bool) reference.Stores {
	return New(Options{CreateInsteadOfMerge: mutant})
}

func TestStores(t *testing.T) { runSuite(t, openMemory) }

func TestCorruptPlan(t *testing.T) {
	ctx := context.Background()
	s := New(Options{})
	op := createOp(t, s, "op", 1)
	ops := s.Ops.(*OperationStore)
	mustT(t, ops.CorruptPlan("op", []byte(`{"kind":"INGES`)))
	_, err := s.Ops.GetPlan(ctx, "op")
	wantErr(t, err, reference.ErrCorruptPlan)
	// A valid plan of another content under the stored fingerprint.
	p := fixturePlan("sp", "doc-op", "op", 0)
	p.Content = "tampered"
	payload, err := reference.EncodePlan(p)
	mustT(t, err)
	mustT(t, ops.CorruptPlan("op", payload))
	_, err = s.Ops.GetPlan(ctx, "op")
	wantErr(t, err, reference.ErrFingerprint)
	_ = op
}
