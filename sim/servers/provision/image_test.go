package provision

import (
	"strings"
	"testing"
)

// TestImageChoice: with no image named, the environment variable wins;
// else the official image, unless the engine has only the locally built
// one (a machine without a registry, where the official name fails with
// "no such image"), which is then used and said so.
func TestImageChoice(t *testing.T) {
	has := func(images ...string) func(string) bool {
		return func(im string) bool {
			for _, h := range images {
				if h == im {
					return true
				}
			}
			return false
		}
	}
	for _, c := range []ImageChoice{postgresChoice, neo4jChoice} {
		t.Setenv(c.Env, "")
		if im, note := c.Choose(has(c.Local)); im != c.Local || !strings.Contains(note, c.Env) || !strings.Contains(note, c.Flag) {
			t.Errorf("%s, only the local build present: %q (%q), want %s and a note naming %s and %s", c.Server, im, note, c.Local, c.Env, c.Flag)
		}
		if im, note := c.Choose(has(c.Official, c.Local)); im != c.Official || note != "" {
			t.Errorf("%s, both present: %q (%q), want %s", c.Server, im, note, c.Official)
		}
		if im, _ := c.Choose(has()); im != c.Official {
			t.Errorf("%s, neither present (the engine may pull): %q, want %s", c.Server, im, c.Official)
		}
		if h := c.hint(c.Official); !strings.Contains(h, c.Env) || !strings.Contains(h, c.Flag) || !strings.Contains(h, c.Local) {
			t.Errorf("%s: the hint for a missing official image does not say what to set: %s", c.Server, h)
		}
		t.Setenv(c.Env, "registry.example/pg:1")
		if im, _ := c.Choose(has(c.Local)); im != "registry.example/pg:1" {
			t.Errorf("%s: %s set, got %q", c.Server, c.Env, im)
		}
	}
}
