package properties

import "github.com/crashmatrix/crashmatrix/reference"

// runConcurrency is filled in by the linearizability checks.
func runConcurrency(t suiteT, opened func(t suiteT) reference.Stores) {}
