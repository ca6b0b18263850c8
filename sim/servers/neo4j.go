package servers

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"github.com/crashmatrix/crashmatrix/adapters/neo4j"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/worker"
	driver "github.com/neo4j/neo4j-go-driver/v5/neo4j"
)

func init() {
	RegisterNeo4j(openNeo4j)
	Neo4jTransactions = neo4jTransactions
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

// neo4jTransactions lists a Neo4j server's running transactions.
func neo4jTransactions(ctx context.Context, uri, user, password string) ([]string, int, error) {
	d, err := driver.NewDriverWithContext(uri, driver.BasicAuth(user, password, ""))
	if err != nil {
		return nil, 0, err
	}
	defer d.Close(ctx)
	res, err := driver.ExecuteQuery(ctx, d, "SHOW TRANSACTIONS YIELD transactionId, status, elapsedTime, waitTime, clientAddress, currentQuery "+
		"RETURN transactionId, status, elapsedTime.milliseconds, waitTime.milliseconds, clientAddress, left(currentQuery, 200) ORDER BY elapsedTime DESC", nil, driver.EagerResultTransformer)
	if err != nil {
		return nil, 0, err
	}
	var lines []string
	long := 0
	for _, r := range res.Records {
		if ms, ok := r.Values[2].(int64); ok && ms > 10000 {
			long++
		}
		lines = append(lines, fmt.Sprintf("  %v %v %vms wait=%vms %v %v", r.Values[0], r.Values[1], r.Values[2], r.Values[3], r.Values[4], r.Values[5]))
	}
	return lines, long, nil
}

// Neo4jPing runs RETURN 1 against a Neo4j server.
var Neo4jPing func(ctx context.Context, uri, user, password string) error

// neo4jUser is the Neo4j user the workers log in as: CRASHMATRIX_NEO4J_USER,
// or neo4j.
func neo4jUser() string { return cmp.Or(os.Getenv(EnvNeo4jUser), "neo4j") }

// openNeo4j opens the Neo4j GraphWriter named by CRASHMATRIX_NEO4J_URI.
// The CREATE-instead-of-MERGE mutant gets a label of its own: the correct
// writer's uniqueness constraint would refuse its duplicates.
func openNeo4j(ctx context.Context, env worker.CaseEnv) (reference.GraphWriter, func() error, error) {
	uri := ViaEndpoint(os.Getenv(EnvNeo4jURI), env.Servers["neo4j"])
	opts := neo4j.Options{}
	if env.Mutant == worker.MutantCreateNotMerge {
		opts = neo4j.Options{CreateInsteadOfMerge: true, Label: "CMNodeMutant"}
	}
	w, err := neo4j.Open(ctx, uri, neo4jUser(), os.Getenv(EnvNeo4jPassword), opts)
	if err != nil {
		return nil, nil, fmt.Errorf("neo4j graph writer: %w", err)
	}
	return w, func() error { return w.Close(context.Background()) }, nil
}
