package storeproc

import (
	"slices"
	"testing"
)

// A store process gets the harness's environment without what the harness
// sets for its own workers or for a conformance run, with its folder and
// its TMPDIR (docs/store-protocol.md, section 7): the same whichever
// process of the harness starts it.
func TestStoreEnvIsTheSameFromEveryProcess(t *testing.T) {
	base := []string{"HOME=/home/u", "PATH=/bin", "CRASHMATRIX_POSTGRES_DSN=postgres://x"}
	worker := append(slices.Clone(base), "GO_FAILPOINTS=a=return(1)", "GOTRACEBACK=all", "TMPDIR=/run/case-1/tmp",
		"CRASHMATRIX_WORKER_SPEC=/run/case-1/worker.json", "CRASHMATRIX_STORE_DIR=/elsewhere")
	conformance := append(slices.Clone(base), "CRASHMATRIX_CONFORMANCE_RUN=Stores", "TMPDIR=/tmp")
	want := append(slices.Clone(base), EnvDir+"=/run/case-1/data", "TMPDIR=/run/store-tmp")
	for name, env := range map[string][]string{"supervisor": base, "worker": worker, "conformance": conformance} {
		if got := storeEnv(env, "/run/case-1/data", "/run/store-tmp"); !slices.Equal(got, want) {
			t.Errorf("from a %s's environment: %q, want %q", name, got, want)
		}
	}
	if got := (Options{Dir: "/run/case-1/data/"}).tempDir(); got != "/run/case-1/tmp" {
		t.Errorf("TMPDIR without Options.TempDir: %s, want tmp beside the data directory", got)
	}
	if got := (Options{Dir: "/run/case-1/data", TempDir: "/run/store-tmp"}).tempDir(); got != "/run/store-tmp" {
		t.Errorf("TMPDIR with Options.TempDir: %s", got)
	}
}
