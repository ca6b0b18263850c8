package servers

import (
	"context"
	"fmt"
	"os"

	"github.com/crashmatrix/crashmatrix/adapters/neo4j"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	driver "github.com/neo4j/neo4j-go-driver/v5/neo4j"
)

func init() {
	RegisterNeo4j(openNeo4j)
	Neo4jPing = func(ctx context.Context, uri, user, password string) error {
		d, err := driver.NewDriverWithContext(uri, driver.BasicAuth(user, password, ""))
		if err != nil {
			return err
		}
		defer d.Close(ctx)
		_, err = driver.ExecuteQuery(ctx, d, "RETURN 1", nil, driver.EagerResultTransformer)
		return err
	}
}

// Neo4jPing runs RETURN 1 against a Neo4j server.
var Neo4jPing func(ctx context.Context, uri, user, password string) error

// openNeo4j opens the Neo4j GraphWriter named by CRASHMATRIX_NEO4J_URI.
// The CREATE-instead-of-MERGE mutant gets a label of its own: the correct
// writer's uniqueness constraint would refuse its duplicates.
func openNeo4j(ctx context.Context, env sim.CaseEnv) (reference.GraphWriter, func() error, error) {
	uri := ViaEndpoint(os.Getenv(EnvNeo4jURI), env.Servers["neo4j"])
	user := os.Getenv(EnvNeo4jUser)
	if user == "" {
		user = "neo4j"
	}
	opts := neo4j.Options{}
	if env.Mutant == sim.MutantCreateNotMerge {
		opts = neo4j.Options{CreateInsteadOfMerge: true, Label: "CMNodeMutant"}
	}
	w, err := neo4j.Open(ctx, uri, user, os.Getenv(EnvNeo4jPassword), opts)
	if err != nil {
		return nil, nil, fmt.Errorf("neo4j graph writer: %w", err)
	}
	return w, func() error { return w.Close(context.Background()) }, nil
}
