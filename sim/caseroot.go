package sim

import (
	"fmt"
	"os"
	"syscall"
)

// CaseRootMinFree is how much room /dev/shm needs before a run puts its
// temporary case data there: a whole certify of the embedded default keeps
// well under 100 MB at its peak, so a container's 64 MB /dev/shm is
// passed over.
const CaseRootMinFree = 1 << 30

// CaseRoot is the folder a run's temporary case data goes under when
// no folder is given (certify, run and explore without --workdir; the Go
// API's CertifyCrashSafety without a report folder): TMPDIR when it is set (the user's choice); else
// /dev/shm (tmpfs) when it is there, writable and has CaseRootMinFree
// free; else the system's temporary folder. Why tmpfs: a worker's SQLite
// fsyncs at every commit, and on a busy disk one fsync can outlast a
// worker's deadline (the case ends undecided, "stuck in an fsync the file
// system had not finished"), while the disk adds nothing to what a run
// tests: a SIGKILL keeps the page cache whatever lies under it, and power
// loss is modelled by the lazy file system over the case data. It returns
// "" for the system's temporary folder (os.MkdirTemp's default).
func CaseRoot() string {
	if os.Getenv("TMPDIR") != "" {
		return ""
	}
	if err := RoomyDir("/dev/shm", CaseRootMinFree); err != nil {
		return ""
	}
	return "/dev/shm"
}

// RoomyDir says why dir cannot take a run's case data: not a folder, not
// writable, or under minFree bytes free.
func RoomyDir(dir string, minFree uint64) error {
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
