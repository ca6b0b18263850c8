package memory

import (
	"context"
	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/properties"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

func openMemory(t *testing.T, mutant bool) reference.Stores {
	return New(Options{CreateInsteadOfMerge: mutant})
}

// The exported conformance suite, as every store runs it.
func TestStores(t *testing.T) {
	properties.Stores(t, func(t *testing.T) reference.Stores { return openMemory(t, false) })
}

// The CreateInsteadOfMerge option stores copies that ReadRecords lists.
func TestCreateInsteadOfMerge(t *testing.T) { storetest.Mutant(t, openMemory) }

func TestCorruptPlan(t *testing.T) {
	ctx := context.Background()
	s := New(Options{})
	op := storetest.CreateOp(t, s, "op", 1)
	ops := s.Ops.(*OperationStore)
	storetest.Must(t, ops.CorruptPlan("op", []byte(`{"kind":"INGES`)))
	_, err := s.Ops.GetPlan(ctx, "op")
	storetest.WantErr(t, err, reference.ErrCorruptPlan)
	// A valid plan of another content under the stored fingerprint.
	p := storetest.FixturePlan("sp", "doc-op", "op", 0)
	p.Content = "tampered"
	payload, err := reference.EncodePlan(p)
	storetest.Must(t, err)
	storetest.Must(t, ops.CorruptPlan("op", payload))
	_, err = s.Ops.GetPlan(ctx, "op")
	storetest.WantErr(t, err, reference.ErrFingerprint)
	_ = op
}
