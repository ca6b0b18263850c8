package provision

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
)

// fakeCgroupRoot is a cgroup v1 mount root with a cpu hierarchy (its root
// cpu.shares) and a pids one.
func fakeCgroupRoot(t *testing.T) string {
	root := t.TempDir()
	for _, h := range []string{"cpu", "pids"} {
		if err := os.MkdirAll(filepath.Join(root, h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "cpu", "cpu.shares"), []byte("1024\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func parentOf(t *testing.T, g cpuGroup) string {
	t.Helper()
	req := testcontainers.GenericContainerRequest{}
	if err := g.customizer().Customize(&req); err != nil {
		t.Fatal(err)
	}
	var hc container.HostConfig
	if req.HostConfigModifier != nil {
		req.HostConfigModifier(&hc)
	}
	return hc.CgroupParent
}

// TestOwnCPUGroupOnCgroupV1: with the cgroupfs driver on cgroup v1 the
// containers get a parent group of their own, with the raised weight.
func TestOwnCPUGroupOnCgroupV1(t *testing.T) {
	root := fakeCgroupRoot(t)
	g := ownCPUGroup(root, "cgroupfs", "1")
	if g.root != root || g.why != "" {
		t.Fatalf("group %+v, want one at %s", g, root)
	}
	b, err := os.ReadFile(filepath.Join(root, "cpu", CgroupParent, "cpu.shares"))
	if err != nil || strings.TrimSpace(string(b)) != "8192" {
		t.Fatalf("cpu.shares of the group: %q, %v", b, err)
	}
	if p := parentOf(t, g); p != "/"+CgroupParent {
		t.Fatalf("containers' cgroup parent %q, want /%s", p, CgroupParent)
	}
	// A second run finds the group there and uses it.
	if g2 := ownCPUGroup(root, "cgroupfs", "1"); g2.root != root {
		t.Fatalf("second run: %+v", g2)
	}
}

// TestOwnCPUGroupLeavesOtherHostsAlone: cgroup v2, the systemd driver, or
// no cpu hierarchy here: the containers stay under the engine's parent,
// nothing is written, and the reason is given.
func TestOwnCPUGroupLeavesOtherHostsAlone(t *testing.T) {
	root := fakeCgroupRoot(t)
	for _, c := range []struct{ driver, version, why string }{
		{"systemd", "2", `"systemd" on cgroup v2`},
		{"cgroupfs", "2", `"cgroupfs" on cgroup v2`},
		{"systemd", "1", `"systemd" on cgroup v1`},
	} {
		g := ownCPUGroup(root, c.driver, c.version)
		if g.root != "" || !strings.Contains(g.why, c.why) {
			t.Errorf("%s v%s: %+v, want none, why naming %s", c.driver, c.version, g, c.why)
		}
		if p := parentOf(t, g); p != "" {
			t.Errorf("%s v%s: cgroup parent %q set", c.driver, c.version, p)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "cpu", CgroupParent)); !os.IsNotExist(err) {
		t.Fatalf("a group was made: %v", err)
	}
	g := ownCPUGroup(t.TempDir(), "cgroupfs", "1")
	if g.root != "" || !strings.Contains(g.why, "no cgroup v1 cpu hierarchy") {
		t.Fatalf("no cpu hierarchy: %+v", g)
	}
}

// TestCPUGroupRemove: the group goes from every hierarchy once empty, and
// stays where members are left (another run's containers).
func TestCPUGroupRemove(t *testing.T) {
	root := fakeCgroupRoot(t)
	g := ownCPUGroup(root, "cgroupfs", "1")
	// The engine made the group in the pids hierarchy too; the cpu one
	// keeps a member (on cgroupfs, rmdir fails while a group has any).
	for _, d := range []string{filepath.Join("pids", CgroupParent), filepath.Join("pids", CgroupParent, "conmon"), filepath.Join("pids", CgroupParent, "libpod-1"),
		filepath.Join("cpu", CgroupParent, "conmon"), filepath.Join("cpu", CgroupParent, "libpod-2")} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A container of another run is still in libpod-2.
	if err := os.WriteFile(filepath.Join(root, "cpu", CgroupParent, "libpod-2", "tasks"), []byte("123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g.remove()
	if _, err := os.Stat(filepath.Join(root, "cpu", CgroupParent, "conmon")); !os.IsNotExist(err) {
		t.Errorf("the empty conmon group in cpu is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "cpu", CgroupParent, "libpod-2")); err != nil {
		t.Errorf("another run's container group was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "pids", CgroupParent)); !os.IsNotExist(err) {
		t.Errorf("the empty group in pids is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "cpu", CgroupParent)); err != nil {
		t.Errorf("the group with a member was removed: %v", err)
	}
	cpuGroup{why: "none"}.remove() // no group: nothing to do, no panic
}
