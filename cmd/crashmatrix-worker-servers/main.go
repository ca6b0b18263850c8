// Command crashmatrix-worker-servers is the slim worker binary of the
// server backend (postgres, with Neo4j for System B): crashmatrix-worker's
// sibling that links the PostgreSQL and Neo4j drivers, which the embedded
// worker does not.
package main

import (
	"os"

	_ "github.com/crashmatrix/crashmatrix/sim/servers" // the postgres backend
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

func main() { os.Exit(worker.WorkerMain("crashmatrix-worker-servers", os.Args[1:])) }
