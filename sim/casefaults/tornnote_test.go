package casefaults

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
)

// A torn power loss that had nothing to tear says so in its note; before,
// it read "N bytes … thrown away, torn: 0 of 0 un-synced pages and sizes
// kept", which looked like a contradiction (the bytes were in files lost
// whole, as their names were not synced).
func TestTornNoteWithNothingToTear(t *testing.T) {
	if got := tornNote(lazyfs.Loss{Torn: true, Bytes: 4096, Names: 1}); got != ", torn: nothing to tear (no un-synced pages in the files that survive)" {
		t.Errorf("nothing to tear: %q", got)
	}
	if got := tornNote(lazyfs.Loss{Torn: true, Changes: 9, Kept: 5, Unit: lazyfs.SectorSize}); got != ", torn: 5 of 9 un-synced 512-byte sectors and sizes kept" {
		t.Errorf("a tear: %q", got)
	}
	if got := tornNote(lazyfs.Loss{Bytes: 4096}); got != "" {
		t.Errorf("a plain power loss: %q", got)
	}
}
