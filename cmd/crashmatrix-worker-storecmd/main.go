// Command crashmatrix-worker-storecmd is the slim worker binary of
// store-cmd (a store in any language, run as a process the worker talks
// to): crashmatrix-worker's sibling that links no store of its own.
package main

import (
	"os"

	"github.com/crashmatrix/crashmatrix/sim"
	_ "github.com/crashmatrix/crashmatrix/sim/storecmd" // stores in any language (--store-cmd)
)

func main() { os.Exit(sim.WorkerMain("crashmatrix-worker-storecmd", os.Args[1:])) }
