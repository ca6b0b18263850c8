package provision

import (
	"slices"
	"strings"
	"testing"
)

func TestParseServerConfig(t *testing.T) {
	args, err := ParseServerConfig([]string{"wal_writer_delay=10s", "synchronous_commit=off"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"-c", "synchronous_commit=off", "-c", "wal_writer_delay=10s"}; !slices.Equal(args, want) {
		t.Fatalf("got %q, want %q", args, want)
	}
	for _, bad := range []string{"synchronous_commit", "=off", "sync commit=off"} {
		if _, err := ParseServerConfig([]string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: want an error naming it, got %v", bad, err)
		}
	}
}
