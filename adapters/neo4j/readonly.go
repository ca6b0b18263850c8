package neo4j

import (
	"context"
	"errors"
	"fmt"

	driver "github.com/neo4j/neo4j-go-driver/v5/neo4j"

	"github.com/crashmatrix/crashmatrix/reference"
)

// ReadOnlyWriter is a Neo4j graph that can only be read: ReadGraph and
// Duplicates run in read transactions (AccessModeRead sessions), and
// Apply refuses. `crashmatrix snapshot` reads a production graph through
// it.
type ReadOnlyWriter struct{ w *Writer }

// ErrReadOnly is Apply's error on a ReadOnlyWriter.
var ErrReadOnly = errors.New("neo4j graph opened read-only")

// OpenReadOnly connects like Open but creates no schema and writes
// nothing.
func OpenReadOnly(ctx context.Context, uri, user, password string, opts Options) (*ReadOnlyWriter, error) {
	opts.CreateInsteadOfMerge = false
	w, err := connect(ctx, uri, user, password, opts)
	if err != nil {
		return nil, err
	}
	w.readOnly = true
	return &ReadOnlyWriter{w}, nil
}

// connect returns a writer whose driver reached the server with the
// credentials; it creates no schema.
func connect(ctx context.Context, uri, user, password string, opts Options) (*Writer, error) {
	label := opts.Label
	if label == "" {
		label = NodeLabel
	}
	if !identRE.MatchString(label) {
		return nil, &Error{Op: "open", Err: fmt.Errorf("%w: label %q is not a plain identifier", reference.ErrInvalidArgument, label)}
	}
	w := &Writer{opts: opts, label: label, secret: password, database: opts.Database,
		q: buildQueries(label, opts.CreateInsteadOfMerge)}
	drv, err := driver.NewDriverWithContext(uri, driver.BasicAuth(user, password, ""))
	if err != nil {
		return nil, w.wrap("open", err)
	}
	w.drv = drv
	if err := drv.VerifyConnectivity(ctx); err != nil {
		_ = drv.Close(ctx)
		return nil, w.wrap("open: verify connectivity to "+redactURI(uri), err)
	}
	return w, nil
}

// Apply implements reference.GraphWriter by refusing.
func (r *ReadOnlyWriter) Apply(context.Context, string, reference.Mutation) error {
	return &Error{Op: "apply", Err: ErrReadOnly}
}

// ReadGraph implements reference.GraphWriter.
func (r *ReadOnlyWriter) ReadGraph(ctx context.Context, space string) (reference.Graph, error) {
	return r.w.ReadGraph(ctx, space)
}

// ReadRecords implements reference.GraphWriter: every stored node and
// relationship, copies included, in a read transaction.
func (r *ReadOnlyWriter) ReadRecords(ctx context.Context, space string) (reference.GraphRecords, error) {
	return r.w.ReadRecords(ctx, space)
}

// Duplicates reports node ids and edge keys stored more than once.
func (r *ReadOnlyWriter) Duplicates(ctx context.Context, space string) ([]string, error) {
	return r.w.Duplicates(ctx, space)
}

// Close closes the driver.
func (r *ReadOnlyWriter) Close(ctx context.Context) error { return r.w.Close(ctx) }
