package provision

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/internal/procstat"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// A run killed by SIGKILL cannot stop its containers (nothing reaps them:
// the Ryuk reaper is off under podman) nor remove the folder its lazy
// mounts lived in. So every container a run starts carries its owner
// (ownerLabel: pid and the start time of the process, so that a recycled
// pid is not taken for the owner), the serverdata folder names its owner
// in a file, and each run that starts containers first removes what
// owners that are gone left behind.

// ownerLabel is the label naming the process that started a container.
const ownerLabel = "crashmatrix.owner"

// ownerFile names the owner of a serverdata folder.
const ownerFile = "owner"

// owner is this process as ownerLabel and ownerFile write it: "pid.start",
// start being the process's start time in clock ticks since boot
// (/proc/PID/stat, field 22).
func owner() string {
	self, _ := procstat.Read(os.Getpid())
	return fmt.Sprintf("%d.%d", os.Getpid(), self.Start)
}

// ownerGone says whether the process an owner string names has ended (or
// its pid now belongs to another process). A string that is not an owner
// is never gone: what crashmatrix did not label is not crashmatrix's.
func ownerGone(o string) (pid int, gone bool) {
	p, s, found := strings.Cut(o, ".")
	pid, err1 := strconv.Atoi(p)
	want, err2 := strconv.ParseUint(s, 10, 64)
	if !found || err1 != nil || err2 != nil || pid <= 0 {
		return 0, false
	}
	st, err := procstat.Read(pid)
	return pid, err != nil || st.Gone() || st.Start != want
}

// withOwner labels a container with this process as its owner.
func withOwner() testcontainers.ContainerCustomizer {
	return testcontainers.WithLabels(map[string]string{ownerLabel: owner()})
}

// reapDead removes the containers and serverdata folders of runs that died
// without removing them, and says so on log. First the lazy mounts of dead
// runs go (lazyfs.CleanStale aborts their FUSE connections, so a container
// that still reads its data from one fails at once instead of hanging).
func reapDead(ctx context.Context, log io.Writer) error {
	gone, err := lazyfs.CleanStale()
	for _, d := range gone {
		fmt.Fprintf(log, "crashmatrix: unmounted the stale lazy mount %s of a run that died\n", d)
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list the containers of dead runs: %w", err))...)
	}
	defer cli.Close()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", ownerLabel)})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list the containers of dead runs: %w", err))...)
	}
	for _, c := range list.Items {
		pid, gone := ownerGone(c.Labels[ownerLabel])
		if !gone {
			continue
		}
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %.12s (image %s) of a run that died (pid %d): %w", c.ID, c.Image, pid, err))
			continue
		}
		fmt.Fprintf(log, "crashmatrix: removed container %.12s (image %s) of a run that died (pid %d)\n", c.ID, c.Image, pid)
	}
	return errors.Join(append(errs, reapServerData(log))...)
}

// reapServerData removes the serverdata folders (see newLazyData) whose
// owner is gone and under which nothing is mounted any more.
func reapServerData(log io.Writer) error {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), "crashmatrix-serverdata-*"))
	if err != nil {
		return err
	}
	ms, err := lazyfs.Mounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // not ours, or being made right now
		}
		pid, gone := ownerGone(strings.TrimSpace(string(b)))
		if !gone || mountedUnder(ms, d) {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s of a run that died (pid %d): %w", d, pid, err))
			continue
		}
		fmt.Fprintf(log, "crashmatrix: removed %s of a run that died (pid %d)\n", d, pid)
	}
	return errors.Join(errs...)
}

// mountedUnder says whether a lazy mount is at or under dir: removing
// such a folder would delete through the mount.
func mountedUnder(ms []lazyfs.MountInfo, dir string) bool {
	for _, m := range ms {
		if m.Dir == dir || strings.HasPrefix(m.Dir, dir+"/") {
			return true
		}
	}
	return false
}
