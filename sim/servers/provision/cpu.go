package provision

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// The database servers' share of the CPU. On a host with cgroup v1 whose
// engine makes the containers' cgroups itself (the cgroupfs driver:
// podman's /libpod_parent, Docker's /docker), the kernel weighs every
// container under that parent together as one task against each process
// outside it. A run's own worker processes, a dozen at once, are such
// processes: beside them, and beside any other CPU-bound job, both
// database servers shared one task's CPU, Neo4j was seen at 4% of a core
// and cases waited for minutes on its graph writes (docs/ci.md).
//
// So crashmatrix's containers run under a parent group of their own,
// /crashmatrix, whose CPU weight (cpu.shares) it raises to CPUShares; only
// its containers are in it, and the engine's own parent and every other
// container are left as they were. Where that cannot be done (cgroup v2,
// the systemd driver, an engine on another machine, no permission), the
// containers stay where the engine puts them and nothing changes.

// CgroupParent is the cgroup crashmatrix's containers run under, on a
// cgroup v1 host with the cgroupfs driver.
const CgroupParent = "crashmatrix"

// CPUShares is the weight of CgroupParent in the cpu hierarchy: eight
// processes' worth (1024 each), what make bench-load found to keep a
// loaded run's verdict and time (docs/performance.md).
const CPUShares = 8192

// cgroupRoot is where the host's cgroup file systems are mounted.
var cgroupRoot = "/sys/fs/cgroup"

// cpuGroup is the parent group the containers of one run go to.
type cpuGroup struct {
	// root is the cgroup mount root; empty when the containers stay under
	// the engine's own parent.
	root string
	// why says why they stay there (empty when they do not).
	why string
}

// ownCPUGroup prepares the containers' parent group: on a cgroup v1 host
// whose engine (driver, version as its /info reports them) uses the
// cgroupfs driver, and whose cpu hierarchy is at root/cpu and writable
// here, it makes root/cpu/CgroupParent with CPUShares.
func ownCPUGroup(root, driver, version string) cpuGroup {
	if driver != "cgroupfs" || version != "1" {
		return cpuGroup{why: fmt.Sprintf("the engine's cgroup driver is %q on cgroup v%s: it weighs containers on its own", driver, version)}
	}
	cpu := filepath.Join(root, "cpu")
	if st, err := os.Stat(filepath.Join(cpu, "cpu.shares")); err != nil || st.IsDir() {
		return cpuGroup{why: "no cgroup v1 cpu hierarchy at " + cpu + " (the engine runs elsewhere?)"}
	}
	dir := filepath.Join(cpu, CgroupParent)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return cpuGroup{why: err.Error()}
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.shares"), []byte(fmt.Sprint(CPUShares)), 0o644); err != nil {
		return cpuGroup{why: err.Error()}
	}
	return cpuGroup{root: root}
}

// customizer puts a container under the group (nothing when the
// containers stay under the engine's parent).
func (g cpuGroup) customizer() testcontainers.ContainerCustomizer {
	return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
		if g.root != "" {
			hc.CgroupParent = "/" + CgroupParent
		}
	})
}

// remove removes the group from every hierarchy the engine made it in,
// with the groups the engine made inside it (one per container, and
// podman's conmon), once no process is left in them: another run's
// containers may still be, and then their groups and the parent stay, as
// they must.
func (g cpuGroup) remove() {
	if g.root == "" {
		return
	}
	ds, _ := filepath.Glob(filepath.Join(g.root, "*", CgroupParent))
	for _, d := range ds {
		kids, _ := os.ReadDir(d)
		for _, k := range kids {
			if k.IsDir() {
				_ = os.Remove(filepath.Join(d, k.Name())) // rmdir: fails while the group has members
			}
		}
		_ = os.Remove(d)
	}
}

// engineCgroups asks the engine for its cgroup driver and version.
func engineCgroups(ctx context.Context) (driver, version string, err error) {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return "", "", err
	}
	defer cli.Close()
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", "", err
	}
	return strings.ToLower(info.Info.CgroupDriver), info.Info.CgroupVersion, nil
}
