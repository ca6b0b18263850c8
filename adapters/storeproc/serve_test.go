package storeproc_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
)

// loopback carries each request through JSON to Serve over Go stores and
// back, as the service protocol's store callbacks do: what Serve decodes
// and encodes, and how an error is spelt on the wire, is all the stores
// over it see.
type loopback struct{ served storeproc.Served }

func (l loopback) Call(ctx context.Context, op string, args json.RawMessage) (json.RawMessage, error) {
	res, err := storeproc.Serve(ctx, l.served, storeproc.Strict, op, args)
	if err != nil {
		w := storeproc.WireErrorOf(err)
		b, _ := json.Marshal(w)
		var back storeproc.WireError
		_ = json.Unmarshal(b, &back)
		return nil, back.Err(op)
	}
	return json.Marshal(res)
}

var allStores = []string{storeproc.StoreOperations, storeproc.StoreStates, storeproc.StoreRegistry, storeproc.StoreGraph, storeproc.StoreLocks}

// TestServeOverConformance runs the store conformance suites over stores
// whose every call goes through the wire form to Serve and back (Over):
// a request Serve decodes wrongly, a result it spells wrongly or an error
// whose code is lost fails the suite the memory stores pass directly.
func TestServeOverConformance(t *testing.T) {
	properties.Stores(t, func(t *testing.T) reference.Stores {
		st, _, _ := storeproc.Over(loopback{storeproc.Served{Stores: memory.New(memory.Options{})}}, storeproc.Strict, allStores)
		return st
	})
}

// TestServeRefusesAStoreItDoesNotServe: a request for a store that is not
// served is unsupported, never a nil dereference.
func TestServeRefusesAStoreItDoesNotServe(t *testing.T) {
	_, err := storeproc.Serve(context.Background(), storeproc.Served{}, storeproc.Strict, "graph.readRecords", json.RawMessage(`{"space":"s"}`))
	if w := storeproc.WireErrorOf(err); w.Code != "unsupported" || !w.Definite {
		t.Fatalf("got %+v, want a definite unsupported error", w)
	}
}
