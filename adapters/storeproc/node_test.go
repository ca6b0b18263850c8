package storeproc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/crashmatrix/crashmatrix/properties"
)

// TestNodeStoreConformance runs the conformance suites over the protocol
// against the Node.js store of examples/node (a log of transaction
// directories, no database), two processes per bundle so the concurrency
// checks race real processes on one directory. About 300 store processes
// and one fsync per write: minutes on a busy machine, so it runs when
// CRASHMATRIX_NODE_CONFORMANCE is set (make certify-node); make test
// certifies the store's crash matrix (cmd/crashmatrix, storecmd/node.txtar).
func TestNodeStoreConformance(t *testing.T) {
	if os.Getenv("CRASHMATRIX_NODE_CONFORMANCE") == "" {
		t.Skip("set CRASHMATRIX_NODE_CONFORMANCE=1 (make certify-node) to run the conformance suites on the Node.js store")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is missing: the Node.js example store (examples/node) cannot be tested: %v", err)
	}
	cmd := node + " " + filepath.Join(examples(t), "..", "node", "store.js")
	properties.Stores(t, protocolStores(t, cmd))
}
