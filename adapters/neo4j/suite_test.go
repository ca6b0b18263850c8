package neo4j

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
)

// prefixed maps every space of the conformance suite (which uses fixed
// names such as "space_a" in every subtest) to a space of its own, so the
// subtests and factory calls sharing the one server do not see each other.
type prefixed struct {
	w      *Writer
	prefix string
}

// at maps a space to the wrapper's own; a blank one stays blank, so the
// store's argument check still sees it.
func (p prefixed) at(space string) string {
	if strings.TrimSpace(space) == "" {
		return space
	}
	return p.prefix + space
}

func (p prefixed) Apply(ctx context.Context, space string, m reference.Mutation) error {
	return p.w.Apply(ctx, p.at(space), m)
}

func (p prefixed) ReadGraph(ctx context.Context, space string) (reference.Graph, error) {
	return p.w.ReadGraph(ctx, p.at(space))
}

func (p prefixed) ReadRecords(ctx context.Context, space string) (reference.GraphRecords, error) {
	return p.w.ReadRecords(ctx, p.at(space))
}

func TestGraphWriterConformance(t *testing.T) {
	properties.Stores(t, func(t *testing.T) reference.Stores {
		return reference.Stores{Writer: prefixed{w: openWriter(t, Options{}), prefix: testSpace(t) + "/"}}
	})
}

// TestGraphWriterConformanceSharedWriter runs the suite again on one
// writer (one driver) shared by every factory call.
func TestGraphWriterConformanceSharedWriter(t *testing.T) {
	w := openWriter(t, Options{})
	properties.Stores(t, func(t *testing.T) reference.Stores {
		return reference.Stores{Writer: prefixed{w: w, prefix: fmt.Sprintf("%s/", testSpace(t))}}
	})
}
