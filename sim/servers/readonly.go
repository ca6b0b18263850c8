package servers

import (
	"context"
	"fmt"

	"github.com/crashmatrix/crashmatrix/adapters/neo4j"
	"github.com/crashmatrix/crashmatrix/adapters/postgres"
	"github.com/crashmatrix/crashmatrix/reference"
)

// OpenReadOnly opens the stores of a PostgreSQL database for reading
// only (postgres.OpenReadOnly: the server refuses every write), with the
// graph in Neo4j when neo4jURI is set (neo4j.OpenReadOnly: read sessions,
// no schema created). What `crashmatrix snapshot` reads a production
// backend through; reading is safe, so no disposable-server check applies.
func OpenReadOnly(ctx context.Context, dsn, neo4jURI, neo4jUser, neo4jPassword string) (reference.Stores, error) {
	st, err := postgres.OpenReadOnly(ctx, dsn)
	if err != nil || neo4jURI == "" {
		return st, err
	}
	if neo4jUser == "" {
		neo4jUser = "neo4j"
	}
	w, err := neo4j.OpenReadOnly(ctx, neo4jURI, neo4jUser, neo4jPassword, neo4j.Options{})
	if err != nil {
		st.Close()
		return reference.Stores{}, fmt.Errorf("neo4j graph (read-only): %w", err)
	}
	st.Writer = w
	st.Closer = closers{st.Closer, closeFunc(func() error { return w.Close(context.Background()) })}
	return st, nil
}
