package properties

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

// Stores runs all five conformance suites against one backend, each on a
// fresh backend from open per subtest; every opened backend is closed when
// its subtest ends. This is the one call a backend author adds to go test.
func Stores(t *testing.T, open func(t *testing.T) reference.Stores) {
	t.Helper()
	RunStores(WrapT(t), confLift(open))
}

// RunStores is Stores on a T, so it can run into a Recorder.
func RunStores(t T, open func(t T) reference.Stores) {
	t.Helper()
	opened := func(t T) reference.Stores {
		s := open(t)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("closing the backend: %v", err)
			}
		})
		return s
	}
	t.Run("OperationStore", func(t T) {
		RunOperationStore(t, func(t T) reference.OperationStore { return opened(t).Ops })
	})
	t.Run("DocumentStateStore", func(t T) {
		RunDocumentStateStore(t, func(t T) reference.DocumentStateStore { return opened(t).States })
	})
	t.Run("EntityRegistry", func(t T) {
		RunEntityRegistry(t, func(t T) reference.EntityRegistry { return opened(t).Registry })
	})
	t.Run("GraphWriter", func(t T) {
		RunGraphWriter(t, func(t T) reference.GraphWriter { return opened(t).Writer })
	})
	t.Run("LockProvider", func(t T) {
		RunLockProvider(t, func(t T) reference.LockProvider { return opened(t).Locks })
	})
}
