package sim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crashmatrix/crashmatrix/internal/procstat"
)

// WorkDirLockFile is the file in a work folder that says which run holds it.
const WorkDirLockFile = ".crashmatrix.lock"

// LockOwner is the run that holds, or held, a work folder.
type LockOwner struct {
	PID int
	// Start is the process's start time in clock ticks since boot
	// (procstat): with the PID, it names the process across PID reuse.
	Start uint64
	// Since is when the run took the folder; Command what it runs.
	Since   time.Time
	Command string
}

func (o LockOwner) String() string {
	s := fmt.Sprintf("PID %d, started %s", o.PID, o.Since.Format("2006-01-02 15:04:05 MST"))
	if o.Command != "" {
		s += ": " + o.Command
	}
	return s
}

// Alive says whether the owner's process still runs: its PID is there,
// with the start time it had when it took the lock (a PID reused by
// another process is not the owner).
func (o LockOwner) Alive() bool {
	st, err := procstat.Read(o.PID)
	return err == nil && !st.Gone() && st.Start == o.Start
}

// WorkDirBusyError says that another run holds the work folder.
type WorkDirBusyError struct {
	Dir   string
	Owner LockOwner
}

func (e *WorkDirBusyError) Error() string {
	return fmt.Sprintf("work folder %s is in use by another crashmatrix run (%s): two runs in one folder overwrite each other's cases and both fail; wait for it to end, or give another --workdir", e.Dir, e.Owner)
}

// WorkDirLock is a run's exclusive hold on its work folder: an open lock
// file with an exclusive flock(2). The kernel drops the flock when the
// process ends however it ends, so a folder whose run was killed is free
// again; the file's content (LockOwner) only says who holds it.
type WorkDirLock struct {
	f    *os.File
	path string
	// Stale is the run that held the folder before and ended without
	// releasing it (killed), when there was one.
	Stale *LockOwner
}

// LockWorkDir takes dir (created if need be) for this run, command saying
// what runs. A folder another live run holds is a *WorkDirBusyError.
func LockWorkDir(dir, command string) (*WorkDirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, WorkDirLockFile)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("work folder %s: %w", dir, err)
		}
		prev, _ := readOwner(f)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case errors.Is(err, syscall.EWOULDBLOCK):
			f.Close()
			return nil, &WorkDirBusyError{Dir: dir, Owner: prev}
		case err != nil && prev.PID != 0 && prev.PID != os.Getpid() && prev.Alive():
			// A file system without flock: the owner's process, checked
			// by its PID and start time, is the lock.
			f.Close()
			return nil, &WorkDirBusyError{Dir: dir, Owner: prev}
		}
		// The file may have been removed by its holder's release between
		// the open and the flock: the lock is on the file at the path.
		if !samePath(f, path) {
			f.Close()
			continue
		}
		l := &WorkDirLock{f: f, path: path}
		if prev, _ = readOwner(f); prev.PID != 0 {
			l.Stale = &prev
		}
		if err := l.write(command); err != nil {
			l.Release()
			return nil, fmt.Errorf("work folder %s: %w", dir, err)
		}
		return l, nil
	}
}

// samePath says whether f is the file at path now.
func samePath(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// write records this process as the owner.
func (l *WorkDirLock) write(command string) error {
	st, err := procstat.Read(os.Getpid())
	if err != nil {
		return err
	}
	text := fmt.Sprintf("pid %d\nstart %d\nsince %s\ncommand %s\n", st.PID, st.Start, time.Now().Format(time.RFC3339), strings.ReplaceAll(command, "\n", " "))
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	if _, err := l.f.WriteAt([]byte(text), 0); err != nil {
		return err
	}
	return nil
}

// readOwner reads a lock file's owner (a zero LockOwner for an empty or
// unreadable file).
func readOwner(f *os.File) (LockOwner, error) {
	var o LockOwner
	b := make([]byte, 4096)
	n, err := f.ReadAt(b, 0)
	if n == 0 {
		return o, err
	}
	for _, line := range strings.Split(string(b[:n]), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			o.PID, _ = strconv.Atoi(v)
		case "start":
			o.Start, _ = strconv.ParseUint(v, 10, 64)
		case "since":
			o.Since, _ = time.Parse(time.RFC3339, v)
		case "command":
			o.Command = v
		}
	}
	return o, nil
}

// Release gives the folder up: the lock file goes, then the lock. It may
// be called more than once, and after the folder was removed.
func (l *WorkDirLock) Release() {
	if l == nil || l.f == nil {
		return
	}
	if samePath(l.f, l.path) {
		_ = os.Remove(l.path)
	}
	_ = l.f.Close()
	l.f = nil
}
