package main

import (
	"fmt"
	"os"
	"syscall"
)

// caseRootMinFree is how much room /dev/shm needs before a run puts its
// temporary case data there: a whole certify of the embedded default keeps
// well under 100 MB at its peak, so a container's 64 MB /dev/shm is
// passed over.
const caseRootMinFree = 1 << 30

// caseRoot is the folder a run's temporary case data goes under when
// --workdir is not given: TMPDIR when it is set (the user's choice); else
// /dev/shm (tmpfs) when it is there, writable and has caseRootMinFree
// free; else the system's temporary folder. Why tmpfs: a worker's SQLite
// fsyncs at every commit, and on a busy disk one fsync can outlast a
// worker's deadline (the case ends undecided, "stuck in an fsync the file
// system had not finished"), while the disk adds nothing to what a run
// tests: a SIGKILL keeps the page cache whatever lies under it, and power
// loss is modelled by the lazy file system over the case data. It returns
// "" for the system's temporary folder (os.MkdirTemp's default).
func caseRoot() string {
	if os.Getenv("TMPDIR") != "" {
		return ""
	}
	if err := roomyDir("/dev/shm", caseRootMinFree); err != nil {
		return ""
	}
	return "/dev/shm"
}

// roomyDir says why dir cannot take a run's case data: not a folder, not
// writable, or under minFree bytes free.
func roomyDir(dir string, minFree uint64) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	const wOK = 2 // access(2)'s W_OK
	if err := syscall.Access(dir, wOK); err != nil {
		return fmt.Errorf("%s: not writable: %w", dir, err)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if free := fs.Bavail * uint64(fs.Bsize); free < minFree {
		return fmt.Errorf("%s has %d MiB free, under %d MiB", dir, free>>20, minFree>>20)
	}
	return nil
}

// benchRoot is where a bench's case data goes without --workdir: /dev/shm
// when caseRoot would take it, TMPDIR or not, since a bench measures the
// harness rather than the disk's fsync (--workdir /tmp measures both);
// else the system's temporary folder.
func benchRoot() string {
	if roomyDir("/dev/shm", caseRootMinFree) == nil {
		return "/dev/shm"
	}
	return os.TempDir()
}
