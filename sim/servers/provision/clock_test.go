package provision

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The offset file holds what libfaketime reads as a relative offset: a
// sign, then whole seconds ("+27000", "-90"); it is replaced whole, never
// seen half written. The wrapper the entrypoint execs preloads the
// library and runs the real postgres, the next one on PATH.
func TestServerClockOffsetFile(t *testing.T) {
	if _, err := os.Stat(filepath.Join(faketimeDir, faketimeLib)); err != nil {
		t.Skip("libfaketime is not installed here (ci/containers/setup-podman.sh installs it)")
	}
	c := newServerClock()
	if c.why != "" {
		t.Fatal(c.why)
	}
	defer c.remove()
	read := func() string {
		b, err := os.ReadFile(filepath.Join(c.dir, clockFile))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read(); got != "+0" {
		t.Fatalf("a new clock's offset is %q, want +0", got)
	}
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{7*time.Hour + 30*time.Minute, "+27000"}, {-90 * time.Second, "-90"}, {0, "+0"}} {
		if err := c.write(tc.d); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != tc.want {
			t.Errorf("offset %s written as %q, want %q", tc.d, got, tc.want)
		}
	}
	if ents, _ := os.ReadDir(c.dir); len(ents) != 2 {
		t.Errorf("the clock folder holds %v, want the offset and bin/ only", ents)
	}
	w, err := os.ReadFile(filepath.Join(c.dir, "bin", "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PATH=${PATH#" + clockMount + "/bin:}", "export LD_PRELOAD=" + faketimeMount + "/" + faketimeLib, `exec postgres "$@"`} {
		if !strings.Contains(string(w), want) {
			t.Errorf("the wrapper lacks %q:\n%s", want, w)
		}
	}
	if !strings.HasPrefix(serverPath, clockMount+"/bin:") || len(c.customizers()) == 0 {
		t.Error("the wrapper is not first on the container's PATH")
	}
	dir := c.dir
	c.remove()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("remove left %s", dir)
	}
}
