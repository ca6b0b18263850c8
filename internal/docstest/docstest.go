// Package docstest keeps the Markdown docs true to the program. It finds two
// kinds of fenced blocks in a doc:
//
//   - a runnable shell block, opened with ```sh run: each command is run as
//     written (with crashmatrix on PATH), must exit as its trailing remark
//     says ("   # exits 1"; 0 without one), and every "# " line under it
//     quotes a line of its output ("..." and "…" stand for any text);
//   - a generated output block: an HTML comment <!-- output: COMMAND -->
//     on the line before the fence. `make docs` (docsgen) writes COMMAND's
//     output into the block; a test runs COMMAND again and requires the
//     same text, up to what differs between two runs (Normalize).
//
// Every other block is prose: shown, never run. Commands that start
// containers or run for minutes belong in plain ```sh blocks.
package docstest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/crashmatrix/crashmatrix/faults"
)

// Block is one fenced block of a Markdown file.
type Block struct {
	Line   int      // 1-based line of the opening fence
	Lang   string   // the info string's first word ("sh", "text", "go")
	Attrs  []string // its other words ("run")
	Body   string   // the text between the fences
	Marker string   // an HTML comment alone on the line before the fence, without <!-- -->
	// byte offsets of Body in the text Blocks read
	start, end int
}

// Runnable says whether the block is a shell block marked "run".
func (b Block) Runnable() bool {
	if b.Lang != "sh" {
		return false
	}
	for _, a := range b.Attrs {
		if a == "run" {
			return true
		}
	}
	return false
}

// OutputCommand is the command whose output the block holds, when its
// marker says <!-- output: COMMAND -->.
func (b Block) OutputCommand() (string, bool) {
	c, ok := strings.CutPrefix(b.Marker, "output:")
	return strings.TrimSpace(c), ok
}

var markerRE = regexp.MustCompile(`^\s*<!--\s*(.*?)\s*-->\s*$`)

// Blocks returns the fenced blocks of a Markdown text (``` fences, possibly
// indented, as in a list item), in order. An unclosed fence is an error
// naming its line.
func Blocks(text string) ([]Block, error) {
	var out []Block
	lines := strings.SplitAfter(text, "\n")
	off := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "```") {
			off += len(l)
			continue
		}
		info := strings.Fields(strings.TrimPrefix(t, "```"))
		b := Block{Line: i + 1}
		if len(info) > 0 {
			b.Lang, b.Attrs = info[0], info[1:]
		}
		if i > 0 {
			if m := markerRE.FindStringSubmatch(lines[i-1]); m != nil {
				b.Marker = m[1]
			}
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		off += len(l)
		b.start = off
		closed := false
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "```" {
				b.end = off
				closed = true
				off += len(lines[i])
				break
			}
			off += len(lines[i])
		}
		if !closed {
			return nil, fmt.Errorf("line %d: the block opened here is never closed", b.Line)
		}
		body := text[b.start:b.end]
		if indent != "" { // a block inside a list item: its lines carry the item's indentation
			var sb strings.Builder
			for _, bl := range strings.SplitAfter(body, "\n") {
				sb.WriteString(strings.TrimPrefix(bl, indent))
			}
			body = sb.String()
		}
		b.Body = body
		out = append(out, b)
	}
	return out, nil
}

// ReplaceBody returns text with block b's body replaced by body (which
// ends with a newline).
func ReplaceBody(text string, b Block, body string) string {
	if body != "" && !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	return text[:b.start] + body + text[b.end:]
}

// Command is a command line of a shell block with what the doc says of it.
type Command struct {
	Line   string   // the command, without a trailing remark
	Quoted []string // the output lines quoted under it ("# ..." lines)
	Exit   int      // the exit status its trailing remark gives ("# exits 1"), else 0
}

var exitsRE = regexp.MustCompile(`\bexits (\d+)`)

// Commands are a block's command lines, each with the "# " lines under it
// that quote its output. A line in parentheses after "#" is a remark, not
// output; so is what follows "   #" on a command line (three spaces), where
// "exits N" gives the exit status. A line ending in a backslash goes on on
// the next.
func Commands(block string) []Command {
	var out []Command
	pending := ""
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimSpace(l)
		if pending != "" {
			l = pending + " " + l
			pending = ""
		}
		switch {
		case l == "":
		case strings.HasPrefix(l, "#"):
			q := strings.TrimSpace(strings.TrimPrefix(l, "#"))
			if len(out) > 0 && q != "" && !strings.HasPrefix(q, "(") {
				out[len(out)-1].Quoted = append(out[len(out)-1].Quoted, q)
			}
		case strings.HasSuffix(l, `\`):
			pending = strings.TrimSpace(strings.TrimSuffix(l, `\`))
		default:
			c := Command{Line: l}
			if cmd, remark, ok := strings.Cut(l, "   #"); ok {
				c.Line = strings.TrimSpace(cmd)
				if m := exitsRE.FindStringSubmatch(remark); m != nil {
					c.Exit, _ = strconv.Atoi(m[1])
				}
			}
			out = append(out, c)
		}
	}
	return out
}

// QuoteRE matches a quoted output line: literal text, "..." and "…" for
// any text, any run of spaces for any run of spaces.
func QuoteRE(q string) *regexp.Regexp {
	var b strings.Builder
	for i, part := range regexp.MustCompile(`\.\.\.|…`).Split(q, -1) {
		if i > 0 {
			b.WriteString(".*")
		}
		for j, w := range strings.Fields(part) {
			if j > 0 {
				b.WriteString(`\s+`)
			}
			b.WriteString(regexp.QuoteMeta(w))
		}
	}
	return regexp.MustCompile(b.String())
}

// Shell runs line with bash -c in dir (env added to the environment) and
// returns its combined output and exit status; a process killed by a
// signal exits 128+9, as the shell reports a SIGKILL. err is set only when
// bash could not run at all.
func Shell(dir string, env []string, line string) (string, int, error) {
	return shell(dir, append(os.Environ(), env...), line)
}

func shell(dir string, env []string, line string) (string, int, error) {
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = dir
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(b), 0, nil
	case errors.As(err, &ee):
		if ee.ExitCode() == -1 {
			return string(b), 128 + 9, nil
		}
		return string(b), ee.ExitCode(), nil
	}
	return string(b), 0, fmt.Errorf("%s: %w", line, err)
}

var goRunRE = regexp.MustCompile(`(?:go run \./cmd/crashmatrix|\./bin/crashmatrix|\bbin/crashmatrix)\b`)

// Docline is a command as the docs write it, for a crashmatrix binary on
// PATH: "go run ./cmd/crashmatrix" and "bin/crashmatrix" become
// "crashmatrix" (a test runs a freshly built binary, not a compile per
// command).
func Docline(line string) string {
	return goRunRE.ReplaceAllString(line, "crashmatrix")
}

// Runner runs doc commands the same way for the generator and the test: in
// Dir (which holds links to the repository's scenarios/ and examples/),
// with BinDir first on PATH and TMPDIR in Dir, so that nothing is left in
// /tmp and the case folders a run names are under Dir.
type Runner struct {
	Root   string // the repository
	BinDir string // holds crashmatrix
}

// Run runs a doc command in a fresh folder under parent and returns its
// output, with that folder written as /tmp, and its exit status.
func (r Runner) Run(parent, line string) (string, int, error) {
	dir, err := os.MkdirTemp(parent, "doc-")
	if err != nil {
		return "", 0, err
	}
	defer os.RemoveAll(dir)
	return r.RunIn(dir, line)
}

// RunIn runs a doc command in dir, which it prepares (links to the
// repository's scenarios/ and examples/, a tmp/ for TMPDIR); the output has
// dir's tmp/ written as /tmp.
func (r Runner) RunIn(dir, line string) (string, int, error) {
	for _, name := range []string{"scenarios", "examples"} {
		link := dir + "/" + name
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(r.Root+"/"+name, link); err != nil {
			return "", 0, err
		}
	}
	tmp := dir + "/tmp"
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", 0, err
	}
	// A reader's shell: crashmatrix's own variables (a server DSN, images)
	// from the caller's environment do not reach the doc's commands.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CRASHMATRIX_") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+r.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"), "TMPDIR="+tmp)
	out, code, err := shell(dir, env, Docline(line))
	out = strings.ReplaceAll(out, tmp, "/tmp")
	out = strings.ReplaceAll(out, dir, ".")
	return out, code, err
}

var (
	durationRE = regexp.MustCompile(`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ns|µs|us|ms|s|m|h)\b`)
	tmpNameRE  = regexp.MustCompile(`(crashmatrix-|doc-)\d+`)
	opIDRE     = regexp.MustCompile(`\b(ingest|retract)-[0-9a-f]{16,}\b`)
)

// Normalize is what two runs of one command have in common: durations
// become "<d>", numbered temporary folders lose their numbers, operation
// ids (minted per run) become "<op>", and trailing spaces and blank lines
// at the end go.
func Normalize(s string) string {
	s = durationRE.ReplaceAllString(s, "<d>")
	s = opIDRE.ReplaceAllString(s, "${1}-<op>")
	s = tmpNameRE.ReplaceAllString(s, "${1}N")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// FirstDifference names the first line where want and got differ after
// Normalize, for a failure message; "" when they agree.
func FirstDifference(want, got string) string {
	w, g := strings.Split(Normalize(want), "\n"), strings.Split(Normalize(got), "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl || (i >= len(w)) != (i >= len(g)) {
			return fmt.Sprintf("line %d of the block:\n  doc:     %q\n  program: %q", i+1, wl, gl)
		}
	}
	return ""
}

// Between is the text of s after the first occurrence of start, up to the
// next sep (or the end).
func Between(s, start, sep string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	s = s[i+len(start):]
	if j := strings.Index(s, sep); j >= 0 {
		s = s[:j]
	}
	return s
}

// Fenced returns the bodies of the blocks of s whose info string starts
// with lang, in order.
func Fenced(s, lang string) []string {
	blocks, err := Blocks(s)
	if err != nil {
		return nil
	}
	var out []string
	for _, b := range blocks {
		if b.Lang == lang {
			out = append(out, b.Body)
		}
	}
	return out
}

// ReplaceSection returns text with the part between the lines
// "<!-- begin NAME -->" and "<!-- end NAME -->" replaced by body; when
// text has no such section it is appended at the end.
func ReplaceSection(text, name, body string) string {
	begin, end := "<!-- begin "+name+" -->\n", "<!-- end "+name+" -->\n"
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	i := strings.Index(text, begin)
	j := strings.Index(text, end)
	if i < 0 || j < i {
		if text != "" && !strings.HasSuffix(text, "\n\n") {
			text = strings.TrimRight(text, "\n") + "\n\n"
		}
		return text + begin + body + end
	}
	return text[:i+len(begin)] + body + text[j:]
}

// Section is the text between "<!-- begin NAME -->" and "<!-- end NAME -->".
func Section(text, name string) (string, bool) {
	begin, end := "<!-- begin "+name+" -->\n", "<!-- end "+name+" -->\n"
	i := strings.Index(text, begin)
	j := strings.Index(text, end)
	if i < 0 || j < i {
		return "", false
	}
	return text[i+len(begin) : j], true
}

// Machine describes this machine for a figure: cores and CPU model, and
// memory. Each is left out when /proc cannot tell.
func Machine(cores int) string {
	parts := []string{strconv.Itoa(cores) + " cores"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range bytes.Split(b, []byte("\n")) {
			if k, v, ok := strings.Cut(string(l), ":"); ok && strings.TrimSpace(k) == "model name" {
				parts[0] += " (" + strings.TrimSpace(v) + ")"
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					parts = append(parts, fmt.Sprintf("%.0f GiB", kb/1024/1024))
				}
			}
		}
	}
	return strings.Join(parts, ", ")
}

// LoadAverage is /proc/loadavg's 1, 5 and 15 minute figures, "" without it.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Generated are the doc sections written from the code itself (`make
// docs`), by name: <!-- begin NAME --> … <!-- end NAME --> in a doc holds
// what Generated[NAME]() returns.
var Generated = map[string]func() string{
	"windows": windowsTable,
}

// windowsTable is the crash-window catalogue (faults.Catalogue) as a
// Markdown table: each window, the step that follows it, what recovery
// must do, and the fault kinds that apply there.
func windowsTable() string {
	var b strings.Builder
	b.WriteString("| window | system | the step that follows | what recovery must do | fault kinds |\n| --- | --- | --- | --- | --- |\n")
	for _, s := range faults.Catalogue {
		system := "A"
		if s.System == faults.PlanSave {
			system = "B"
		}
		kinds := make([]string, len(s.Kinds))
		for i, k := range s.Kinds {
			kinds[i] = string(k)
		}
		step := s.Step
		if s.InRecovery {
			step += " (recovery only)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s (%s) | %s | %s |\n", s.Point, system, step, s.Window, s.Recovery, strings.Join(kinds, ", "))
	}
	return b.String()
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Links are the relative link targets of a Markdown text ("docs/x.md",
// "x.md#anchor", "#anchor"), outside fenced blocks; web links are left out.
func Links(text string) []string {
	var out []string
	inFence := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			if t := m[1]; !strings.Contains(t, "://") && !strings.HasPrefix(t, "mailto:") {
				out = append(out, t)
			}
		}
	}
	return out
}

// Anchors are the anchors GitHub gives the headings of a Markdown text:
// lower case, punctuation dropped, spaces as hyphens.
func Anchors(text string) map[string]bool {
	out := map[string]bool{}
	inFence := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// GitCommit names the git checkout of the working directory for a
// figure: "commit abc1234", with " (with uncommitted changes)" when a
// tracked file other than exclude (the doc being written) differs from
// it; "unknown commit" outside a checkout.
func GitCommit(exclude string) string {
	out, err := exec.Command("git", "rev-parse", "--short=7", "HEAD").Output()
	if err != nil {
		return "unknown commit"
	}
	commit := "commit " + strings.TrimSpace(string(out))
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return commit
	}
	st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		return commit
	}
	skip := ""
	if exclude != "" {
		skip, _ = filepath.Abs(exclude)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if len(l) > 3 && filepath.Join(strings.TrimSpace(string(root)), l[3:]) != skip {
			return commit + " (with uncommitted changes)"
		}
	}
	return commit
}
