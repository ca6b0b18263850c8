package lazyfs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// MountInfo is one lazy mount listed in /proc/mounts.
type MountInfo struct {
	Dir string
	// PID is the process serving it (from the mount's source name).
	PID int
}

// Mounts lists the lazy mounts in /proc/mounts.
func Mounts() ([]MountInfo, error) {
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []MountInfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[2] != FSType {
			continue
		}
		mi := MountInfo{Dir: unescape(fields[1])}
		if p, ok := strings.CutPrefix(fields[0], sourcePrefix); ok {
			mi.PID, _ = strconv.Atoi(p)
		}
		out = append(out, mi)
	}
	return out, sc.Err()
}

// unescape undoes the octal escapes of /proc/mounts (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// CleanStale unmounts every lazy mount whose serving process is gone (a
// supervisor killed by SIGKILL leaves its mounts behind, answering
// "transport endpoint is not connected"); a run calls it before it
// mounts. Mounts of live processes (another run) are left alone. It
// returns the mount points it removed.
func CleanStale() ([]string, error) { return cleanStale(func(MountInfo) bool { return true }) }

// cleanStale is CleanStale for the mounts pick picks (tests pick their
// own, so as not to touch the stale mounts of other runs).
func cleanStale(pick func(MountInfo) bool) ([]string, error) {
	ms, err := Mounts()
	if err != nil {
		return nil, err
	}
	var gone []string
	var errs []error
	for _, m := range ms {
		if !pick(m) || m.PID > 0 && alive(m.PID) {
			continue
		}
		// A process that died waiting on its own mount stays a zombie
		// until the connection is aborted: abort it first.
		if err := abort(m.Dir); err != nil {
			errs = append(errs, fmt.Errorf("abort the connection of stale lazy mount %s: %w", m.Dir, err))
		}
		if err := syscall.Unmount(m.Dir, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount stale lazy mount %s (pid %d gone): %w", m.Dir, m.PID, err))
			continue
		}
		gone = append(gone, m.Dir)
	}
	return gone, errors.Join(errs...)
}

// alive reports whether process pid exists, and is neither a zombie nor
// dying: a process killed (SIGKILL pending) while one of its threads
// waits on its own mount never gets further by itself.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return !os.IsNotExist(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			if strings.HasPrefix(v, "Z") || strings.HasPrefix(v, "X") {
				return false
			}
		case "ShdPnd", "SigPnd":
			if mask, err := strconv.ParseUint(v, 16, 64); err == nil && mask&(1<<(uint(syscall.SIGKILL)-1)) != 0 {
				return false
			}
		}
	}
	return true
}

// fusectl is where the kernel lists FUSE connections (the fusectl file
// system).
const fusectl = "/sys/fs/fuse/connections"

// abort aborts the FUSE connection of the mount at dir, through fusectl
// (mounted for the purpose, and unmounted again, when it is not): every
// request waiting on it fails, so processes stuck on it can end.
func abort(dir string) error {
	minor, err := deviceMinor(dir)
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(fusectl)
	if err != nil {
		return err
	}
	if len(ents) == 0 {
		if err := syscall.Mount("fusectl", fusectl, "fusectl", 0, ""); err != nil {
			return fmt.Errorf("mount fusectl on %s: %w", fusectl, err)
		}
		defer syscall.Unmount(fusectl, 0)
	}
	return os.WriteFile(fmt.Sprintf("%s/%d/abort", fusectl, minor), []byte("1"), 0o200)
}

// deviceMinor is the minor device number of the mount at dir (the FUSE
// connection's number), from /proc/self/mountinfo.
func deviceMinor(dir string) (int, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescape(f[4]) == dir {
			_, min, ok := strings.Cut(f[2], ":")
			if n, err := strconv.Atoi(min); ok && err == nil {
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("%s is not in /proc/self/mountinfo", dir)
}

var (
	availOnce sync.Once
	availErr  error
)

// Available reports whether lazy mounts work here: nil, or the reason
// they do not (callers say "power loss: not tested (reason)"). The answer
// comes from a real trial mount, made once per process.
func Available() error {
	availOnce.Do(func() { availErr = probe() })
	return availErr
}

func probe() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("the lazy file system needs Linux FUSE; this is %s", runtime.GOOS)
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("cannot open /dev/fuse: %v (FUSE missing, or a container without --device /dev/fuse)", err)
	}
	f.Close()
	dir, err := os.MkdirTemp("", "lazyfs-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	fs, err := Mount(dir, Options{})
	if err != nil {
		if errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("%v (mounting needs root, CAP_SYS_ADMIN)", err)
		}
		return err
	}
	if err := fs.Unmount(); err != nil {
		return err
	}
	return nil
}
