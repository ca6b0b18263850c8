// Command crashmatrix-worker-storecmd is the slim worker binary of
// store-cmd (a store in any language, run as a process the worker talks
// to): crashmatrix-worker's sibling that links no store of its own.
package main

import (
	"os"

	_ "github.com/crashmatrix/crashmatrix/sim/storecmd" // stores in any language (--store-cmd)
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

func main() { os.Exit(worker.WorkerMain("crashmatrix-worker-storecmd", os.Args[1:])) }
