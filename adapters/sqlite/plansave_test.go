package sqlite

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference/plansave/plansavetest"
)

func openPlanSave(t *testing.T, dir string, unique bool) (plansavetest.Stores, io.Closer) {
	t.Helper()
	s, err := OpenPlanSave(dir, unique)
	if err != nil {
		t.Fatal(err)
	}
	return s, s
}

func TestPlanSaveStores(t *testing.T) {
	plansavetest.TestStores(t, func(t *testing.T) plansavetest.Stores {
		s, c := openPlanSave(t, t.TempDir(), true)
		t.Cleanup(func() { _ = c.Close() })
		return s
	})
}

// The crash scenarios of seed 000 on the two files: a new handle on the
// same directory is the restarted process.
func TestPlanSaveCrashRecovery(t *testing.T) {
	plansavetest.TestCrashRecovery(t, openPlanSave)
}

func TestOpenPlanSaveRejectsBadDirectory(t *testing.T) {
	for _, dir := range []string{"", " ", "a?b"} {
		if s, err := OpenPlanSave(dir, true); err == nil {
			_ = s.Close()
			t.Errorf("OpenPlanSave(%q) succeeded", dir)
		}
	}
	// A directory that does not exist is an error naming the file.
	_, err := OpenPlanSave(filepath.Join(t.TempDir(), "missing", "deeper"), true)
	if err == nil || !strings.Contains(err.Error(), "checkpoints.db") {
		t.Errorf("missing directory: %v, want an error naming checkpoints.db", err)
	}
}
