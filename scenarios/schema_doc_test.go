package scenarios

import (
	"os"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/check"
)

// TestSchemaNamesEveryInvariant: SCHEMA.md's expect table names the range
// of invariants a scenario may list, first to last of check.All (it said
// I1..I8 once I9 existed).
func TestSchemaNamesEveryInvariant(t *testing.T) {
	b, err := os.ReadFile("SCHEMA.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "`" + check.All[0].Short() + "`..`" + check.All[len(check.All)-1].Short() + "`"
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| `holds` |") {
			if !strings.Contains(line, want) {
				t.Fatalf("SCHEMA.md: the holds row does not say %s: %s", want, line)
			}
			return
		}
	}
	t.Fatal("SCHEMA.md: no row for holds in the expect table")
}
