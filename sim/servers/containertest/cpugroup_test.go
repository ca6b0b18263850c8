package containertest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/sim/servers/provision"
)

// TestContainersRunInTheirOwnCPUGroup: on a cgroup v1 host whose engine
// makes the containers' cgroups (cgroupfs), every process of both
// database servers runs under crashmatrix's own parent group, whose CPU
// weight is raised, so that the run's own worker processes do not starve
// them (provision/cpu.go). Elsewhere the engine weighs containers itself.
func TestContainersRunInTheirOwnCPUGroup(t *testing.T) {
	if started.CPUGroup == "" {
		if strings.Contains(started.CPUGroupWhy, "cgroup driver is") || strings.Contains(started.CPUGroupWhy, "no cgroup v1 cpu hierarchy") {
			t.Skipf("not a cgroup v1 host with the cgroupfs driver: %s", started.CPUGroupWhy)
		}
		t.Fatalf("the containers stay under the engine's parent: %s", started.CPUGroupWhy)
	}
	dir := filepath.Join("/sys/fs/cgroup/cpu", started.CPUGroup)
	b, err := os.ReadFile(filepath.Join(dir, "cpu.shares"))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(provision.CPUShares) {
		t.Fatalf("cpu.shares of %s: %q, %v; want %d", dir, b, err, provision.CPUShares)
	}
	comms := map[string]int{}
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" {
			return err
		}
		procs, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, pid := range strings.Fields(string(procs)) {
			if c, err := os.ReadFile("/proc/" + pid + "/comm"); err == nil {
				comms[strings.TrimSpace(string(c))]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if comms["postgres"] == 0 || comms["java"] == 0 {
		t.Fatalf("processes under %s: %v; want PostgreSQL's (postgres) and Neo4j's (java)", dir, comms)
	}
}
