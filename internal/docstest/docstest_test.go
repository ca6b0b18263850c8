package docstest

import (
	"strings"
	"testing"
)

const doc = "# T\n\n```sh run\ncrashmatrix certify --in-process   # exits 1: the memory store\n# NOT CERTIFIED: ...\n# (a remark)\ncrashmatrix run a.yaml \\\n  --repeat 2\n```\n\n<!-- output: crashmatrix certify -->\n```text\nold\n```\n\n1. a step\n   ```yaml\n   edges:\n     - x\n   ```\n"

func TestBlocks(t *testing.T) {
	bs, err := Blocks(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 3 {
		t.Fatalf("got %d blocks, want 3: %+v", len(bs), bs)
	}
	if !bs[0].Runnable() || bs[0].Line != 3 || bs[1].Runnable() {
		t.Errorf("runnable/line wrong: %+v %+v", bs[0], bs[1])
	}
	if c, ok := bs[1].OutputCommand(); !ok || c != "crashmatrix certify" || bs[1].Body != "old\n" {
		t.Errorf("output block: %q %v body %q", c, ok, bs[1].Body)
	}
	if _, ok := bs[0].OutputCommand(); ok {
		t.Error("a block without a marker has an output command")
	}
	if bs[2].Lang != "yaml" || bs[2].Body != "edges:\n  - x\n" {
		t.Errorf("indented block: %q %q", bs[2].Lang, bs[2].Body)
	}
	got := ReplaceBody(doc, bs[1], "new\nlines")
	if !strings.Contains(got, "```text\nnew\nlines\n```\n") || strings.Contains(got, "old") {
		t.Errorf("ReplaceBody:\n%s", got)
	}
	if _, err := Blocks("a\n```sh\nx\n"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("unclosed fence: %v", err)
	}
}

func TestCommands(t *testing.T) {
	bs, _ := Blocks(doc)
	cs := Commands(bs[0].Body)
	if len(cs) != 2 {
		t.Fatalf("got %d commands, want 2: %+v", len(cs), cs)
	}
	if cs[0].Line != "crashmatrix certify --in-process" || cs[0].Exit != 1 || len(cs[0].Quoted) != 1 || cs[0].Quoted[0] != "NOT CERTIFIED: ..." {
		t.Errorf("first command: %+v", cs[0])
	}
	if cs[1].Line != "crashmatrix run a.yaml --repeat 2" || cs[1].Exit != 0 {
		t.Errorf("continued command: %+v", cs[1])
	}
}

func TestQuoteRE(t *testing.T) {
	re := QuoteRE("106 cases in ...: 0 pass")
	if !re.MatchString("x 106 cases  in 579ms: 0 pass, 106 FAIL") || re.MatchString("105 cases in 1s: 0 pass") {
		t.Error("QuoteRE matches wrongly")
	}
}

func TestNormalize(t *testing.T) {
	a := "1 case in 1ms: pass   \ncase data: /tmp/crashmatrix-123\ntook 1m2.5s\n[op ingest-84339317854fd4f49f5c60c0f5ddd22b]\n\n"
	b := "1 case in 250µs: pass\ncase data: /tmp/crashmatrix-98\ntook 3s\n[op ingest-3990d5d3589aaf3e53166ac880dbca2e]"
	if Normalize(a) != Normalize(b) {
		t.Errorf("%q != %q", Normalize(a), Normalize(b))
	}
	if Normalize("2 cases") == Normalize("3 cases") {
		t.Error("counts must not be masked")
	}
	if d := FirstDifference("a\nb\n", "a\nc"); !strings.Contains(d, "line 2") {
		t.Errorf("FirstDifference: %q", d)
	}
	if d := FirstDifference("a\n", "a\nmore"); d == "" {
		t.Error("a longer output must differ")
	}
}

func TestReplaceSection(t *testing.T) {
	s := ReplaceSection("# P\n", "x", "one")
	if s != "# P\n\n<!-- begin x -->\none\n<!-- end x -->\n" {
		t.Fatalf("append: %q", s)
	}
	s = ReplaceSection(s+"tail\n", "x", "two\n")
	if got, ok := Section(s, "x"); !ok || got != "two\n" || !strings.HasSuffix(s, "<!-- end x -->\ntail\n") {
		t.Errorf("replace: %q", s)
	}
}

func TestLinksAndAnchors(t *testing.T) {
	text := "# Certify your Go store\n## Store windows: crash windows inside `your` store\nsee [a](docs/a.md#x), [b](https://e.com/y), [c](#store-windows-crash-windows-inside-your-store)\n```sh\n[d](no.md)\n```\n"
	links := Links(text)
	if strings.Join(links, " ") != "docs/a.md#x #store-windows-crash-windows-inside-your-store" {
		t.Errorf("Links: %q", links)
	}
	a := Anchors(text)
	if !a["certify-your-go-store"] || !a["store-windows-crash-windows-inside-your-store"] || len(a) != 2 {
		t.Errorf("Anchors: %v", a)
	}
}
