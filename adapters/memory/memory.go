// Package memory provides thread-safe in-memory implementations of the
// reference store interfaces. They keep nothing across a process exit, so
// they cannot pass crash certification; they serve as the executable model
// the conformance suites are written against, and (with
// Options.CreateInsteadOfMerge) as a deliberately broken graph writer.
package memory

import (
	"context"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

// Options configures the in-memory stores.
type Options struct {
	// CreateInsteadOfMerge makes the graph writer CREATE a new node or edge
	// on every upsert instead of MERGE-ing into the existing one: a mutant
	// that produces duplicates.
	CreateInsteadOfMerge bool
}

// New returns a fresh, empty set of in-memory stores.
func New(opts Options) reference.Stores {
	return reference.Stores{
		Ops:      NewOperationStore(),
		States:   NewStateStore(),
		Registry: NewRegistry(),
		Writer:   NewWriter(opts),
		Locks:    NewLocks(),
	}
}

var (
	_ reference.OperationStore     = (*OperationStore)(nil)
	_ reference.DocumentStateStore = (*StateStore)(nil)
	_ reference.EntityRegistry     = (*Registry)(nil)
	_ reference.GraphWriter        = (*Writer)(nil)
	_ reference.LockProvider       = (*Locks)(nil)
)

func blank(s string) bool { return strings.TrimSpace(s) == "" }

func ctxErr(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	return ctx.Err()
}
