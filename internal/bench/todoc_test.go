package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// ToDoc writes what the run printed (and printed it too) into its section
// under the line naming the arguments without --doc; a failed run leaves
// the file alone.
func TestToDoc(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "perf.md")
	old := "# P\n\n<!-- begin bench x -->\nold\n<!-- end bench x -->\ntail\n"
	if err := os.WriteFile(doc, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	args := []string{"bench", "--doc", doc, "--rounds", "1", "--doc=" + doc}
	if err := ToDoc(&out, doc, "bench x", args, func(w io.Writer) error { _, err := fmt.Fprintln(w, "figure 1"); return err }); err != nil {
		t.Fatal(err)
	}
	if out.String() != "figure 1\n" {
		t.Fatalf("printed %q", out.String())
	}
	b, _ := os.ReadFile(doc)
	want := regexp.MustCompile("(?s)^# P\n\n<!-- begin bench x -->\n(<!--[^\n]*-->\n)?Written by `crashmatrix bench --rounds 1` on .*load average .* at the end\\.\n\n```text\nfigure 1\n```\n<!-- end bench x -->\ntail\n$")
	if !want.Match(b) {
		t.Fatalf("doc:\n%s", b)
	}
	failed := errors.New("did not certify")
	if err := ToDoc(io.Discard, doc, "bench x", nil, func(io.Writer) error { return failed }); err != failed {
		t.Fatalf("a failed run: %v", err)
	}
	if after, _ := os.ReadFile(doc); !bytes.Equal(after, b) {
		t.Fatalf("a failed run changed the doc:\n%s", after)
	}
}
