package properties

import (
	"sort"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

// CheckStores runs the Stores suite without a *testing.T, for a store the
// caller cannot put in a Go test (crashmatrix certify --store-cmd runs it
// before the crash matrix). open gets the name of the (sub)test asking and
// a fresh directory, removed when that test ends. It returns the failures,
// each as "conformance/Stores/<suite>/<test>: <message>", and the names of the tests
// skipped with their reason; no failures means the stores conform.
func CheckStores(open func(test, dir string) (reference.Stores, error)) (failures, skipped []string) {
	r := newRecorder("conformance")
	defer r.Close()
	// In a subtest: a Fatalf ends its goroutine, not the caller's.
	r.Run("Stores", func(t suiteT) {
		runStores(t, func(t suiteT) reference.Stores {
			s, err := open(t.Name(), t.TempDir())
			if err != nil {
				t.Fatalf("opening the stores: %v", err)
			}
			return s
		})
	})
	r.root.mu.Lock()
	defer r.root.mu.Unlock()
	for _, f := range r.root.failures {
		failures = append(failures, f.String())
	}
	for _, l := range r.root.logs {
		if strings.Contains(l, ": SKIP: ") {
			skipped = append(skipped, l)
		}
	}
	sort.Strings(skipped)
	return failures, skipped
}
