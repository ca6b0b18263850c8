package properties

import (
	"github.com/crashmatrix/crashmatrix/reference"
)

// StoresFailures runs the Stores suite as Stores does, on a fresh bundle
// from open for each case (closed after it), but without a testing.T:
// nothing fails, and it returns what did. It is the negative control of
// Stores: run it on a deliberately broken store and assert that the
// subtest named for the bug failed. It is also how a store that cannot
// live in a Go test is checked (crashmatrix certify --store-cmd). open
// gets the name of the (sub)test asking and a fresh folder, removed when
// that test ends.
//
// Each failed subtest is a key, its path below Stores
// ("LockProvider/ExpiryHandsOverWithGreaterToken"), and so is every
// subtest above it ("LockProvider"); the value is the first failure
// message under it. A failure outside every subtest (open failed for the
// first bundle) is under "". Correct stores give an empty map.
func StoresFailures(open func(test, dir string) (reference.Stores, error)) map[string]string {
	r := newRecorder("")
	r.Run("Stores", func(t suiteT) {
		runStores(t, func(t suiteT) reference.Stores {
			st, err := open(t.Name(), t.TempDir())
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			return st
		})
	})
	r.Close()
	return failurePaths(r.Failures(), "/Stores")
}
