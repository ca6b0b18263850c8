package provision

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// deadOwner is the owner string of a process that has ended.
func deadOwner(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", "cat /proc/self/stat")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return fmt.Sprintf("%d.%s", cmd.Process.Pid, f[19])
}

func TestOwnerGone(t *testing.T) {
	me := owner()
	if _, gone := ownerGone(me); gone {
		t.Errorf("ownerGone(%q) (this process): gone", me)
	}
	pid, start, _ := strings.Cut(me, ".")
	if _, gone := ownerGone(pid + ".1" + start); !gone {
		t.Errorf("ownerGone with this pid and another start time: not gone (a recycled pid taken for the owner)")
	}
	dead := deadOwner(t)
	if _, gone := ownerGone(dead); !gone {
		t.Errorf("ownerGone(%q) (an ended process): not gone", dead)
	}
	for _, junk := range []string{"", "abc", "12", "-3.5", "12.x"} {
		if _, gone := ownerGone(junk); gone {
			t.Errorf("ownerGone(%q): gone; what is not an owner is never gone", junk)
		}
	}
}

func TestReapServerDataRemovesOnlyTheFoldersOfDeadOwners(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mk := func(name, own string) string {
		d := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(d, "postgres"), 0o755); err != nil {
			t.Fatal(err)
		}
		if own != "" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(own+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	dead := mk("crashmatrix-serverdata-dead", deadOwner(t))
	live := mk("crashmatrix-serverdata-live", owner())
	unowned := mk("crashmatrix-serverdata-unowned", "")
	other := mk("other-dead", deadOwner(t))
	var log bytes.Buffer
	if err := reapServerData(&log); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("%s (its owner ended) is still there", dead)
	}
	if !strings.Contains(log.String(), "removed "+dead+" of a run that died") {
		t.Errorf("log does not say it removed %s: %q", dead, log.String())
	}
	for _, d := range []string{live, unowned, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
}
