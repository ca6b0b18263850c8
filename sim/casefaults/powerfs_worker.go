//go:build crashmatrix_worker

package casefaults

import "errors"

// A worker binary (built with -tags crashmatrix_worker) runs workers and
// never mounts: it links no FUSE. Should it be asked to supervise a run,
// the power-loss column says it cannot run here rather than run without
// its file system.

var errNoLazyFS = errors.New("this binary is a worker binary, built without the lazy file system of power loss (-tags crashmatrix_worker); run crashmatrix")

func lazyAvailable() error { return errNoLazyFS }

func lazyCleanStale() ([]string, error) { return nil, errNoLazyFS }

func mountLazy(string, string) (lazyMount, error) { return nil, errNoLazyFS }
