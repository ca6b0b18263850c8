package bench

import (
	"os"

	"github.com/crashmatrix/crashmatrix/sim"
)

// root is where a bench's case data goes without --workdir: /dev/shm
// when sim.CaseRoot would take it, TMPDIR or not, since a bench measures the
// harness rather than the disk's fsync (--workdir /tmp measures both);
// else the system's temporary folder.
func root() string {
	if sim.RoomyDir("/dev/shm", sim.CaseRootMinFree) == nil {
		return "/dev/shm"
	}
	return os.TempDir()
}
