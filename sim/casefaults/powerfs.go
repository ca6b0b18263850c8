//go:build !crashmatrix_worker

package casefaults

import "github.com/crashmatrix/crashmatrix/faults/lazyfs"

// The lazy file system of the power-loss column (faults/lazyfs, a FUSE
// mount this process serves), which only a supervisor mounts. A worker
// binary is built with -tags crashmatrix_worker (make build) and links
// powerfs_worker.go instead: no go-fuse in a process started thousands of
// times that never mounts.

func lazyAvailable() error { return lazyfs.Available() }

func lazyCleanStale() ([]string, error) { return lazyfs.CleanStale() }

func mountLazy(mountpoint, backing string) (lazyMount, error) {
	fs, err := lazyfs.Mount(mountpoint, lazyfs.Options{Backing: backing})
	if err != nil {
		return nil, err
	}
	return fs, nil
}
