package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// FieldError is one problem of a scenario file, located by line, column
// and field path. Load and Parse return every FieldError of a file joined
// with errors.Join, ordered by position.
type FieldError struct {
	File   string
	Line   int // 1-based; 0 when unknown
	Column int // 1-based; 0 when unknown
	// Path is the field path, e.g. steps[1].faults[0].kind; empty for the
	// file as a whole.
	Path string
	Msg  string
}

// Error renders "file:line:col: path: message".
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// FieldErrors returns the FieldErrors joined in err (by Load, Parse or
// LoadDir), in order.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if fe, ok := err.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		walk(errors.Unwrap(err))
	}
	walk(err)
	return out
}

// Load reads and validates one scenario file. It never writes the file.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load scenario: %w", err)
	}
	return Parse(path, data)
}

// LoadDir loads every *.yaml and *.yml file of dir, in name order, and
// checks that scenario names are unique. It reports the errors of all
// files together.
func LoadDir(dir string) ([]*Scenario, error) {
	return loadFS(os.DirFS(dir), ".", dir)
}

func loadFS(fsys fs.FS, dir, display string) ([]*Scenario, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("load scenarios: %w", err)
	}
	var out []*Scenario
	var errs []error
	seen := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			continue
		}
		name := filepath.Join(display, e.Name())
		data, err := fs.ReadFile(fsys, pathJoin(dir, e.Name()))
		if err != nil {
			errs = append(errs, fmt.Errorf("load scenario %s: %w", name, err))
			continue
		}
		s, err := Parse(name, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[s.Name]; dup {
			errs = append(errs, &FieldError{File: name, Path: "name", Msg: fmt.Sprintf("scenario name %q is already used by %s", s.Name, prev)})
			continue
		}
		seen[s.Name] = name
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

func pathJoin(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

// Parse decodes and validates one scenario; name is the file name used in
// error messages.
func Parse(name string, data []byte) (*Scenario, error) {
	d := &decoder{file: name, src: data, nodes: map[string]ast.Node{}}
	s := d.decode()
	if len(d.errs) > 0 {
		sort.SliceStable(d.errs, func(i, j int) bool {
			a, b := d.errs[i], d.errs[j]
			if a.Line != b.Line {
				return a.Line < b.Line
			}
			return a.Column < b.Column
		})
		errs := make([]error, len(d.errs))
		for i, e := range d.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	return s, nil
}

var (
	nameRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	workerRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
	documentRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
)

// Backends are the backend names a scenario may require.
var Backends = []string{"sqlite", "memory", "postgres", "containers", "store-cmd"}

// Mutants are the backend mutants a scenario may switch on.
var Mutants = []string{sim.MutantCreateNotMerge, sim.MutantNoUniqueConstraint, sim.MutantSynchronousOff, sim.MutantRenewIgnoresHolder, sim.MutantTwoTransactionCreate}

// The fields of each mapping, in canonical order.
var (
	topFields       = []string{"name", "description", "system", "backend", "service", "bugs", "mutant", "seed", "leaseTTL", "documents", "initial", "steps", "expect"}
	stepFields      = []string{"worker", "actions", "faults", "background", "resubmit", "expectHit", "continueOnError", "kill", "meanwhile"}
	meanwhileFields = []string{"worker", "does"}
	killFields      = []string{"seed", "offset", "base", "after", "afterIndex", "delta"}
	actionFields    = []string{"do", "doc", "document", "op", "rounds", "thread", "owner", "question", "minutes", "approve", "content"}
	faultFields     = []string{"point", "kind", "hit", "pause", "server", "tear", "call", "step", "of", "syscall"}
	durableFields   = []string{"call", "step", "of", "syscall"}
	expectFields    = []string{"verdict", "holds", "breaks"}
	serviceFields   = []string{"command", "bugs"}
)

// actionRules says, per action, which fields are required and which are
// allowed, and which system the action belongs to.
var actionRules = map[string]struct {
	system             faults.System
	required, optional []string
}{
	"ingest":            {faults.Ingestion, []string{"doc", "document"}, []string{"op"}},
	"retract":           {faults.Ingestion, []string{"doc"}, nil},
	"resume":            {faults.Ingestion, []string{"op"}, nil},
	"recover":           {faults.Ingestion, nil, []string{"rounds"}},
	"plansave-start":    {faults.PlanSave, []string{"thread", "owner", "question"}, []string{"minutes"}},
	"plansave-invoke":   {faults.PlanSave, []string{"thread"}, []string{"approve"}},
	"plansave-conflict": {faults.PlanSave, []string{"thread"}, nil},
}

var actionNames = []string{"ingest", "retract", "resume", "recover", "plansave-start", "plansave-invoke", "plansave-conflict"}

// DefaultRounds is what Parse fills in for a recover action without rounds.
const DefaultRounds = 10

type decoder struct {
	file  string
	src   []byte
	errs  []*FieldError
	nodes map[string]ast.Node // field path -> value node
	keys  map[string]ast.Node // field path -> key node
}

// pos locates a node: a block mapping by its first key, others by their
// first token.
func pos(n ast.Node) (int, int) {
	switch v := n.(type) {
	case nil:
		return 0, 0
	case *ast.MappingNode:
		if len(v.Values) > 0 && !v.IsFlowStyle {
			return pos(v.Values[0].Key)
		}
		return tokPos(v.Start)
	case *ast.SequenceNode:
		return tokPos(v.Start)
	case *ast.LiteralNode:
		return tokPos(v.Start)
	case *ast.MappingValueNode:
		return pos(v.Key)
	case *ast.DocumentNode:
		if v.Start != nil {
			return tokPos(v.Start)
		}
		return pos(v.Body)
	}
	return tokPos(n.GetToken())
}

func tokPos(t *token.Token) (int, int) {
	if t == nil || t.Position == nil {
		return 0, 0
	}
	return t.Position.Line, t.Position.Column
}

func (d *decoder) errAt(n ast.Node, path, format string, args ...any) {
	line, col := pos(n)
	d.errs = append(d.errs, &FieldError{File: d.file, Line: line, Column: col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// at returns the node of a field path, or of its nearest ancestor that
// exists (where a missing field should have been).
func (d *decoder) at(path string) ast.Node {
	for {
		if n, ok := d.nodes[path]; ok {
			return n
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return d.nodes[""]
		}
		path = path[:i]
	}
}

// keyAt is the key node of a field, for errors about the field as a whole.
func (d *decoder) keyAt(path string) ast.Node {
	if n, ok := d.keys[path]; ok {
		return n
	}
	return d.at(path)
}

func (d *decoder) errPath(path, format string, args ...any) {
	d.errAt(d.at(path), path, format, args...)
}

func child(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func kindName(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.NullNode, nil:
		return "nothing"
	}
	return strings.ToLower(n.Type().String())
}

// plain reports anchors, aliases and tags, which a scenario does not use,
// and returns the node itself otherwise (nil for null).
func (d *decoder) plain(n ast.Node, path string) (ast.Node, bool) {
	switch n.(type) {
	case *ast.AnchorNode, *ast.AliasNode, *ast.TagNode, *ast.MergeKeyNode:
		d.errAt(n, path, "anchors, aliases, tags and merge keys are not supported in scenario files")
		return nil, false
	case *ast.NullNode, nil:
		return nil, true
	}
	return n, true
}

// fields is a decoded mapping.
type fields struct {
	path string
	node ast.Node
	vals map[string]ast.Node
}

func (f fields) has(k string) bool { _, ok := f.vals[k]; return ok }

// mapping decodes a mapping with the given known keys; unknown keys are
// errors. It returns ok=false when n is not a mapping.
func (d *decoder) mapping(n ast.Node, path string, known []string) (fields, bool) {
	f := fields{path: path, node: n, vals: map[string]ast.Node{}}
	m, ok := n.(*ast.MappingNode)
	if !ok {
		d.errAt(n, path, "want a mapping, got %s", kindName(n))
		return f, false
	}
	for _, mv := range m.Values {
		kn, ok := d.plain(mv.Key, path)
		if !ok {
			continue
		}
		key := ""
		switch k := kn.(type) {
		case *ast.StringNode:
			key = k.Value
		case nil:
			d.errAt(mv, path, "a mapping key must not be empty")
			continue
		default:
			key = k.GetToken().Value
		}
		p := child(path, key)
		if !slices.Contains(known, key) {
			d.errAt(kn, p, "unknown field %q (want one of %s)", key, strings.Join(known, ", "))
			continue
		}
		f.vals[key] = mv.Value
		d.nodes[p] = mv.Value
		if d.keys == nil {
			d.keys = map[string]ast.Node{}
		}
		d.keys[p] = kn
	}
	return f, true
}

// str decodes a string field ("" when absent or null).
func (d *decoder) str(f fields, key string) string {
	n, ok := d.plain(f.vals[key], child(f.path, key))
	if !ok || n == nil {
		return ""
	}
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value
	case *ast.LiteralNode:
		return v.Value.Value
	}
	d.errAt(n, child(f.path, key), "want a string, got %s (quote it)", kindName(n))
	return ""
}

func (d *decoder) integer(f fields, key string) int64 {
	p := child(f.path, key)
	n, ok := d.plain(f.vals[key], p)
	if !ok || n == nil {
		return 0
	}
	if v, ok := n.(*ast.IntegerNode); ok {
		switch x := v.Value.(type) {
		case int64:
			return x
		case uint64:
			if x <= 1<<63-1 {
				return int64(x)
			}
		}
		d.errAt(n, p, "integer %s out of range", v.GetToken().Value)
		return 0
	}
	d.errAt(n, p, "want an integer, got %s", kindName(n))
	return 0
}

func (d *decoder) boolean(f fields, key string) bool {
	p := child(f.path, key)
	n, ok := d.plain(f.vals[key], p)
	if !ok || n == nil {
		return false
	}
	if v, ok := n.(*ast.BoolNode); ok {
		return v.Value
	}
	d.errAt(n, p, "want true or false, got %s", kindName(n))
	return false
}

func (d *decoder) duration(f fields, key string) time.Duration {
	p := child(f.path, key)
	if !f.has(key) {
		return 0
	}
	s := d.str(f, key)
	if s == "" {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		d.errPath(p, "bad duration %q (want a positive Go duration such as 250ms or 1.5s)", s)
		return 0
	}
	if v%time.Millisecond != 0 {
		d.errPath(p, "duration %q is finer than a millisecond", s)
	}
	return v
}

// list decodes a list field; present reports whether the key was given
// with a list (even an empty one).
func (d *decoder) list(f fields, key string) (items []ast.Node, present bool) {
	p := child(f.path, key)
	n, ok := d.plain(f.vals[key], p)
	if !ok || n == nil {
		return nil, false
	}
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.errAt(n, p, "want a list, got %s", kindName(n))
		return nil, false
	}
	for i, v := range seq.Values {
		d.nodes[index(p, i)] = v
	}
	return seq.Values, true
}

// strings decodes a list of strings.
func (d *decoder) strList(f fields, key string) ([]string, bool) {
	items, present := d.list(f, key)
	p := child(f.path, key)
	out := []string{}
	for i, n := range items {
		ip := index(p, i)
		n, ok := d.plain(n, ip)
		if !ok {
			continue
		}
		if s, ok := n.(*ast.StringNode); ok {
			out = append(out, s.Value)
			continue
		}
		d.errAt(n, ip, "want a string, got %s", kindName(n))
	}
	if !present {
		return nil, false
	}
	return out, true
}

func (d *decoder) decode() *Scenario {
	file, err := parser.ParseBytes(d.src, 0)
	if err != nil {
		d.syntaxError(err)
		return nil
	}
	if len(file.Docs) != 1 {
		n := ast.Node(nil)
		if len(file.Docs) > 1 {
			n = file.Docs[1]
		}
		d.errAt(n, "", "a scenario file holds exactly one YAML document, found %d", len(file.Docs))
		return nil
	}
	body, ok := d.plain(file.Docs[0].Body, "")
	if !ok {
		return nil
	}
	if body == nil {
		d.errs = append(d.errs, &FieldError{File: d.file, Line: 1, Msg: "empty scenario file"})
		return nil
	}
	d.nodes[""] = body
	top, ok := d.mapping(body, "", topFields)
	if !ok {
		return nil
	}
	s := &Scenario{}
	s.Name = d.str(top, "name")
	switch {
	case !top.has("name") || s.Name == "":
		d.errAt(body, "name", "required")
	case !nameRE.MatchString(s.Name):
		d.errPath("name", "%q is not a valid name (lower-case letters, digits and '-')", s.Name)
	}
	s.Description = d.str(top, "description")
	s.System = faults.Ingestion
	if top.has("system") {
		switch sys := d.str(top, "system"); faults.System(sys) {
		case faults.Ingestion, faults.PlanSave:
			s.System = faults.System(sys)
		default:
			d.errPath("system", "unknown system %q (want ingestion or plansave)", sys)
		}
	}
	if s.Backend = d.str(top, "backend"); s.Backend != "" && !slices.Contains(Backends, s.Backend) {
		d.errPath("backend", "unknown backend %q (want one of %s, or leave it out)", s.Backend, strings.Join(Backends, ", "))
	}
	d.decodeBugs(s, top)
	d.decodeService(s, top)
	if s.Mutant = d.str(top, "mutant"); s.Mutant != "" {
		switch {
		case !slices.Contains(Mutants, s.Mutant):
			d.errPath("mutant", "unknown mutant %q (want one of %s)", s.Mutant, strings.Join(Mutants, ", "))
		case (s.Mutant == sim.MutantCreateNotMerge || s.Mutant == sim.MutantRenewIgnoresHolder || s.Mutant == sim.MutantTwoTransactionCreate) && s.System != faults.Ingestion,
			s.Mutant == sim.MutantNoUniqueConstraint && s.System != faults.PlanSave:
			d.errPath("mutant", "mutant %s does not apply to system %s", s.Mutant, s.System)
		}
	}
	s.Seed = d.integer(top, "seed")
	s.LeaseTTL = d.duration(top, "leaseTTL")
	d.decodeDocuments(s, top)
	d.decodeInitial(s, top)
	d.decodeSteps(s, top)
	d.decodeExpect(s, top)
	return s
}

func (d *decoder) decodeBugs(s *Scenario, top fields) {
	names, _ := d.strList(top, "bugs")
	known := make([]string, len(reference.Bugs))
	for i, b := range reference.Bugs {
		known[i] = string(b)
	}
	for i, b := range names {
		p := index("bugs", i)
		switch {
		case !slices.Contains(known, b):
			d.errPath(p, "unknown bug %q (want one of %s)", b, strings.Join(known, ", "))
		case slices.Contains(s.Bugs, reference.Bug(b)):
			d.errPath(p, "bug %q listed twice", b)
		case reference.Bug(b).System() != s.System:
			d.errPath(p, "bug %q is a defect of system %s; it does not apply to system %s", b, reference.Bug(b).System(), s.System)
		default:
			s.Bugs = append(s.Bugs, reference.Bug(b))
		}
	}
}

// serviceBugRE is a service's broken variant's name (as run --bug's
// under --service-cmd).
var serviceBugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

func (d *decoder) decodeService(s *Scenario, top fields) {
	n, ok := d.plain(top.vals["service"], "service")
	if !ok || n == nil {
		return
	}
	f, ok := d.mapping(n, "service", serviceFields)
	if !ok {
		return
	}
	s.Service = &Service{Command: d.str(f, "command")}
	if strings.TrimSpace(s.Service.Command) == "" {
		d.errAt(n, "service.command", "required: the service's command line (as run --service-cmd's)")
	}
	names, _ := d.strList(f, "bugs")
	for i, b := range names {
		p := index("service.bugs", i)
		switch {
		case !serviceBugRE.MatchString(b):
			d.errPath(p, "bug %q: a service's broken variant is named in lower-case letters, digits and '-'", b)
		case slices.Contains(s.Service.Bugs, reference.Bug(b)):
			d.errPath(p, "bug %q listed twice", b)
		default:
			s.Service.Bugs = append(s.Service.Bugs, reference.Bug(b))
		}
	}
	if len(s.Bugs) > 0 {
		d.errPath("bugs", "a scenario with a service lists its bugs under service.bugs (they are the service's, passed in hello)")
	}
}

func (d *decoder) decodeDocuments(s *Scenario, top fields) {
	n, ok := d.plain(top.vals["documents"], "documents")
	if !ok || n == nil {
		return
	}
	mn, ok := n.(*ast.MappingNode)
	if !ok {
		d.errAt(n, "documents", "want a mapping of document name to content, got %s", kindName(n))
		return
	}
	s.Documents = map[string]string{}
	for _, mv := range mn.Values {
		kn, ok := d.plain(mv.Key, "documents")
		if !ok {
			continue
		}
		key := ""
		if ks, ok := kn.(*ast.StringNode); ok {
			key = ks.Value
		} else if kn != nil {
			key = kn.GetToken().Value
		}
		p := "documents." + key
		d.nodes[p] = mv.Value
		if d.keys == nil {
			d.keys = map[string]ast.Node{}
		}
		d.keys[p] = kn
		if !documentRE.MatchString(key) {
			d.errAt(kn, p, "%q is not a valid document name (letters, digits, '_', '.', '-')", key)
			continue
		}
		content := d.str(fields{path: "documents", vals: map[string]ast.Node{key: mv.Value}}, key)
		if _, err := reference.ParseFakeDocument(content); err != nil {
			d.documentError(mv.Value, p, err)
		}
		s.Documents[key] = content
	}
}

// documentError places a ParseFakeDocument error ("line N: ...") on the
// line of the file it refers to, when the document is a block scalar.
func (d *decoder) documentError(n ast.Node, path string, err error) {
	msg := err.Error()
	var ln int
	if _, e := fmt.Sscanf(msg, "line %d:", &ln); e == nil {
		if lit, ok := n.(*ast.LiteralNode); ok && lit.Value != nil && lit.Value.Token != nil && lit.Value.Token.Position != nil {
			line := lit.Value.Token.Position.Line + ln - 1
			col := 1
			if lines := bytes.Split(d.src, []byte("\n")); line-1 < len(lines) {
				col = len(lines[line-1]) - len(bytes.TrimLeft(lines[line-1], " ")) + 1
			}
			d.errs = append(d.errs, &FieldError{File: d.file, Line: line, Column: col, Path: path,
				Msg: fmt.Sprintf("document does not parse: %s", msg)})
			return
		}
	}
	d.errAt(n, path, "document does not parse: %s", msg)
}

func (d *decoder) decodeSteps(s *Scenario, top fields) {
	items, present := d.list(top, "steps")
	if !present || len(items) == 0 {
		d.errAt(d.keyAt("steps"), "steps", "required: at least one step, the last one named %s", QuiesceWorker)
		return
	}
	workers := map[string]int{}
	lastActionsOK := true
	for i, n := range items {
		sp := index("steps", i)
		n, ok := d.plain(n, sp)
		if !ok {
			continue
		}
		f, ok := d.mapping(n, sp, stepFields)
		if !ok {
			s.Steps = append(s.Steps, Step{})
			continue
		}
		st := Step{Worker: d.str(f, "worker"), Background: d.boolean(f, "background"), ContinueOnError: d.boolean(f, "continueOnError")}
		wp := child(sp, "worker")
		switch {
		case st.Worker == "":
			d.errAt(n, wp, "required")
		case !workerRE.MatchString(st.Worker):
			d.errPath(wp, "%q is not a valid worker name (letters, digits, '_', '-')", st.Worker)
		default:
			if j, dup := workers[st.Worker]; dup {
				d.errPath(wp, "worker %q already names steps[%d]", st.Worker, j)
			} else {
				workers[st.Worker] = i
			}
		}
		acts, _ := d.list(f, "actions")
		actionsOK := true
		for j, an := range acts {
			if a, ok := d.decodeAction(s, an, index(child(sp, "actions"), j)); ok {
				st.Actions = append(st.Actions, a)
			} else {
				actionsOK = false
			}
		}
		fs, _ := d.list(f, "faults")
		armed := map[faults.Point]int{}
		for j, fn := range fs {
			fp := index(child(sp, "faults"), j)
			ft, ok := d.decodeFault(s, fn, fp)
			if !ok {
				continue
			}
			if k, dup := armed[ft.Point]; dup {
				d.errPath(child(fp, "point"), "point %s is already armed in this worker by faults[%d]", ft.Point, k)
				continue
			}
			armed[ft.Point] = j
			st.Faults = append(st.Faults, ft)
		}
		resub, _ := d.strList(f, "resubmit")
		for j, w := range resub {
			rp := index(child(sp, "resubmit"), j)
			k, ok := workers[w]
			switch {
			case w == st.Worker:
				d.errPath(rp, "a worker cannot resubmit its own actions")
			case !ok || k >= i:
				d.errPath(rp, "resubmit %q: no earlier step has that worker (resubmit names workers of earlier steps)", w)
			case slices.Contains(st.Resubmit, w):
				d.errPath(rp, "worker %q listed twice", w)
			default:
				st.Resubmit = append(st.Resubmit, w)
			}
		}
		if len(acts) == 0 && len(st.Resubmit) == 0 {
			d.errAt(d.keyAt(child(sp, "actions")), child(sp, "actions"), "a step needs actions (or resubmit)")
		}
		if hits, present := d.strList(f, "expectHit"); present {
			st.ExpectHit = []faults.Point{}
			for j, h := range hits {
				hp := index(child(sp, "expectHit"), j)
				p, err := parsePoint(h)
				switch {
				case err != nil:
					d.errPath(hp, "%v", err)
				case !hasPoint(st.Faults, p):
					d.errPath(hp, "point %s is not armed in this worker (faults only report hits where they are armed)", p)
				case slices.Contains(st.ExpectHit, p):
					d.errPath(hp, "point %s listed twice", p)
				default:
					st.ExpectHit = append(st.ExpectHit, p)
				}
			}
		}
		if kn, ok := f.vals["kill"]; ok {
			st.Kill = d.decodeKill(kn, child(sp, "kill"))
			if st.Kill != nil && st.Background {
				d.errPath(child(sp, "kill"), "a killed worker cannot run in the background")
			}
		}
		if hasPoint(st.Faults, catalogue.DurableStepPoint) && (st.Background || st.Kill != nil) {
			d.errPath(child(sp, "faults"), "a step killed after a durable step runs in the foreground and has no kill block")
		}
		if mn, ok := f.vals["meanwhile"]; ok {
			st.Meanwhile = d.decodeMeanwhile(mn, child(sp, "meanwhile"))
			if st.Meanwhile != nil && !slices.ContainsFunc(st.Faults, func(f Fault) bool { return f.Kind == faults.Pause }) {
				d.errPath(child(sp, "meanwhile"), "a step with meanwhile must stall: arm a pause fault in it")
			}
		}
		s.Steps = append(s.Steps, st)
		lastActionsOK = actionsOK
	}
	for i, st := range s.Steps {
		if m := st.Meanwhile; m != nil && (m.Worker == st.Worker || !slices.ContainsFunc(s.Steps, func(o Step) bool { return o.Worker == m.Worker })) {
			d.errPath(child(child(index("steps", i), "meanwhile"), "worker"), "meanwhile worker %q: want another step's worker", m.Worker)
		}
	}
	last := len(items) - 1
	lp := index("steps", last)
	if len(s.Steps) != len(items) {
		return
	}
	q := s.Steps[last]
	if q.Worker != QuiesceWorker {
		d.errPath(child(lp, "worker"), "the last step must be the worker %q (the checker reads its recovery to judge liveness), got %q", QuiesceWorker, q.Worker)
		return
	}
	if len(q.Faults) > 0 {
		d.errPath(child(lp, "faults"), "the %s step arms no faults: faults stop before the final recovery", QuiesceWorker)
	}
	if q.Kill != nil {
		d.errPath(child(lp, "kill"), "the %s step is not killed: faults stop before the final recovery", QuiesceWorker)
	}
	if q.Background {
		d.errPath(child(lp, "background"), "the %s step cannot run in the background", QuiesceWorker)
	}
	if !lastActionsOK {
		return
	}
	has := func(do string) bool {
		return slices.ContainsFunc(q.Actions, func(a Action) bool { return a.Do == do })
	}
	if s.System == faults.PlanSave {
		if !has("plansave-invoke") || !has("plansave-conflict") {
			d.errAt(d.keyAt(child(lp, "actions")), child(lp, "actions"), "the %s step of a plansave scenario needs a plansave-invoke and a plansave-conflict action", QuiesceWorker)
		}
	} else if !has("recover") {
		d.errAt(d.keyAt(child(lp, "actions")), child(lp, "actions"), "the %s step of an ingestion scenario needs a recover action", QuiesceWorker)
	}
}

func hasPoint(fs []Fault, p faults.Point) bool {
	return slices.ContainsFunc(fs, func(f Fault) bool { return f.Point == p })
}

func (d *decoder) decodeAction(s *Scenario, n ast.Node, path string) (Action, bool) {
	n, ok := d.plain(n, path)
	if !ok {
		return Action{}, false
	}
	f, ok := d.mapping(n, path, actionFields)
	if !ok {
		return Action{}, false
	}
	a := Action{Do: d.str(f, "do"), Doc: d.str(f, "doc"), Document: d.str(f, "document"), Op: d.str(f, "op"),
		Rounds: int(d.integer(f, "rounds")), Thread: d.str(f, "thread"), Owner: d.str(f, "owner"), Question: d.str(f, "question"),
		Minutes: int(d.integer(f, "minutes")), Approve: d.boolean(f, "approve")}
	if f.has("content") {
		d.errAt(d.keyAt(child(path, "content")), child(path, "content"), "inline content is not supported: put the text under documents and name it with document: NAME")
	}
	rule, known := actionRules[a.Do]
	switch {
	case !f.has("do") || a.Do == "":
		d.errAt(n, child(path, "do"), "required (one of %s)", strings.Join(actionNames, ", "))
		return a, false
	case !known:
		d.errPath(child(path, "do"), "unknown action %q (want one of %s)", a.Do, strings.Join(actionNames, ", "))
		return a, false
	case rule.system != s.System:
		d.errPath(child(path, "do"), "action %s belongs to system %s, the scenario is %s", a.Do, rule.system, s.System)
	}
	for _, k := range actionFields {
		if k == "do" || k == "content" {
			continue
		}
		req, opt := slices.Contains(rule.required, k), slices.Contains(rule.optional, k)
		switch {
		case f.has(k) && !req && !opt:
			d.errAt(d.keyAt(child(path, k)), child(path, k), "field %s does not apply to do: %s", k, a.Do)
		case req && !f.has(k):
			d.errAt(n, child(path, k), "do: %s needs %s", a.Do, k)
		}
	}
	if a.Document != "" {
		if _, ok := s.Documents[a.Document]; !ok {
			d.errPath(child(path, "document"), "unknown document %q (define it under documents)", a.Document)
		}
	}
	if a.Do == "recover" {
		if f.has("rounds") && a.Rounds < 1 {
			d.errPath(child(path, "rounds"), "rounds must be at least 1, got %d", a.Rounds)
		}
		if a.Rounds == 0 {
			a.Rounds = DefaultRounds
		}
	}
	if a.Minutes < 0 {
		d.errPath(child(path, "minutes"), "minutes must not be negative, got %d", a.Minutes)
	}
	return a, true
}

func (d *decoder) decodeFault(s *Scenario, n ast.Node, path string) (Fault, bool) {
	n, ok := d.plain(n, path)
	if !ok {
		return Fault{}, false
	}
	f, ok := d.mapping(n, path, faultFields)
	if !ok {
		return Fault{}, false
	}
	var ft Fault
	good := true
	ps, ks := d.str(f, "point"), d.str(f, "kind")
	if ps == string(catalogue.DurableStepPoint) {
		return d.decodeDurable(s, n, f, path, ks)
	}
	for _, k := range durableFields {
		if f.has(k) {
			d.errAt(d.keyAt(child(path, k)), child(path, k), "%s applies to point %s only", k, catalogue.DurableStepPoint)
			good = false
		}
	}
	if ps == "" {
		d.errAt(n, child(path, "point"), "required")
		good = false
	} else if p, err := parsePoint(ps); err != nil {
		d.errPath(child(path, "point"), "%v", err)
		good = false
	} else {
		ft.Point = p
	}
	if ks == "" {
		d.errAt(n, child(path, "kind"), "required")
		good = false
	} else if k, err := faults.ParseKind(ks); err != nil {
		d.errPath(child(path, "kind"), "%v", err)
		good = false
	} else {
		ft.Kind = k
	}
	if good {
		spec, ok := faults.Lookup(ft.Point)
		if !ok {
			// A store-declared window: any store fault kind, either system.
			spec = faults.Spec{Point: ft.Point, System: s.System, Kinds: faults.StoreKinds}
		}
		if ft.Kind.IsServer() {
			ft.Server = "postgres"
			if f.has("server") {
				ft.Server = d.str(f, "server")
			}
			if !slices.Contains(faults.Servers, ft.Server) {
				d.errPath(child(path, "server"), "unknown server %q (want one of %s)", ft.Server, strings.Join(faults.Servers, ", "))
				good = false
			} else if !spec.AppliesServer(ft.Kind, ft.Server) {
				why := "Neo4j holds only System A's graph"
				if ft.Kind.HoldsPastLease() {
					why = "it holds a request past the lease: it applies where a holder may stall past its lease (kind pause applies), on Neo4j before its graph writes, clock-jump on PostgreSQL only"
				}
				d.errPath(child(path, "server"), "a %s fault against %s does not apply at %s (%s)", ft.Kind, ft.Server, ft.Point, why)
				good = false
			}
		} else if f.has("server") {
			d.errAt(d.keyAt(child(path, "server")), child(path, "server"), "server applies to the server fault kinds only (%s), not %s", "server-crash, ack-lost, conn-reset, server-pause, partition, clock-jump", ft.Kind)
			good = false
		} else if !spec.Applies(ft.Kind) {
			kinds := make([]string, len(spec.Kinds))
			for i, k := range spec.Kinds {
				kinds[i] = string(k)
			}
			d.errPath(child(path, "kind"), "kind %s does not apply at %s (applies: %s)", ft.Kind, ft.Point, strings.Join(kinds, ", "))
			good = false
		}
		if spec.System != s.System {
			d.errPath(child(path, "point"), "point %s belongs to system %s, the scenario is %s", ft.Point, spec.System, s.System)
			good = false
		}
	}
	ft.Hit = 1
	if f.has("hit") {
		ft.Hit = int(d.integer(f, "hit"))
		if ft.Hit < 0 {
			d.errPath(child(path, "hit"), "hit must be 0 (every hit) or a 1-based hit number, got %d", ft.Hit)
			good = false
		}
	}
	if f.has("pause") {
		ft.Pause = d.duration(f, "pause")
		if ft.Kind != "" && ft.Kind != faults.Pause {
			d.errAt(d.keyAt(child(path, "pause")), child(path, "pause"), "pause applies to kind pause only, not %s", ft.Kind)
			good = false
		}
	} else if ft.Kind == faults.Pause {
		d.errAt(n, child(path, "pause"), "kind pause needs pause (a duration, e.g. 600ms: beyond twice the lease TTL to outlive the lease)")
		good = false
	}
	var tearOK bool
	ft.Tear, tearOK = d.decodeTear(f, path, ft.Kind)
	return ft, good && tearOK
}

// decodeTear decodes a fault's tear (0 for 4 KiB pages, the default):
// torn-write faults only.
func (d *decoder) decodeTear(f fields, path string, kind faults.Kind) (int, bool) {
	if !f.has("tear") {
		return 0, true
	}
	switch tear := d.integer(f, "tear"); {
	case kind != "" && kind != faults.TornWrite:
		d.errAt(d.keyAt(child(path, "tear")), child(path, "tear"), "tear applies to kind torn-write only, not %s", kind)
	case faults.CheckTear(int(tear)) != nil:
		d.errPath(child(path, "tear"), "tear is %d (4 KiB pages, the default), %d (disk sectors) or a smaller power of two down to %d (a tear inside one sector), got %d", faults.TearPage, faults.TearSector, faults.TearByte, tear)
	default:
		return faults.ActionTear(int(tear)), true
	}
	return 0, false
}

// decodeDurable decodes a durable-step kill: {point: durableStep, kind:
// crash, power-loss or torn-write, call: a store method, hit: its call (1-based, the
// calls of it that make a durable file operation), step: the durable file
// operation it is killed right after; of and syscall optional; server: a
// database server whose own durable steps during the call count, and
// which is killed instead of the worker, its power cut with it for
// power-loss and torn-write}.
func (d *decoder) decodeDurable(s *Scenario, n ast.Node, f fields, path, ks string) (Fault, bool) {
	ft := Fault{Point: catalogue.DurableStepPoint, Hit: 1, Call: d.str(f, "call"), Step: int(d.integer(f, "step")), Of: int(d.integer(f, "of")), Syscall: d.str(f, "syscall")}
	good := true
	bad := func(key, format string, args ...any) {
		d.errPath(child(path, key), format, args...)
		good = false
	}
	switch k, err := faults.ParseKind(ks); {
	case ks == "":
		d.errAt(n, child(path, "kind"), "required (crash, power-loss or torn-write)")
		good = false
	case err != nil:
		bad("kind", "%v", err)
	case k != faults.Crash && k != faults.PowerLoss && k != faults.TornWrite:
		bad("kind", "kind %s does not apply at %s (applies: crash, power-loss, torn-write)", k, catalogue.DurableStepPoint)
	default:
		ft.Kind = k
	}
	// The store call's system (System B's checkpoints.* and plans.*,
	// System A's others) is the scenario's.
	if sys := catalogue.MethodSystem(ft.Call); s.system() != sys && f.has("call") {
		bad("point", "point %s at store call %s belongs to system %s, the scenario is %s", catalogue.DurableStepPoint, ft.Call, sys, s.system())
	}
	if f.has("pause") {
		d.errAt(d.keyAt(child(path, "pause")), child(path, "pause"), "pause does not apply at point %s", catalogue.DurableStepPoint)
		good = false
	}
	var tearOK bool
	if ft.Tear, tearOK = d.decodeTear(f, path, ft.Kind); !tearOK {
		good = false
	}
	if f.has("server") {
		// The server's own durable steps during the call, the server
		// killed (sim/casefaults/serverdurable.go).
		// killed; with power-loss or torn-write the power of its data
		// mount cut at that instant too.
		if ft.Server = d.str(f, "server"); !slices.Contains(faults.Servers, ft.Server) {
			bad("server", "unknown server %q (want one of %s)", ft.Server, strings.Join(faults.Servers, ", "))
		}
	}
	switch {
	case !f.has("call"):
		d.errAt(n, child(path, "call"), "required: the store call the kill is inside (one of %s)", strings.Join(sim.StoreMethods(), ", "))
		good = false
	case !slices.Contains(sim.StoreMethods(), ft.Call):
		bad("call", "unknown store call %q (want one of %s)", ft.Call, strings.Join(sim.StoreMethods(), ", "))
	}
	if f.has("hit") {
		if ft.Hit = int(d.integer(f, "hit")); ft.Hit < 1 {
			bad("hit", "hit must be a 1-based number (which call of %s that makes a durable file operation), got %d", ft.Call, ft.Hit)
		}
	}
	switch {
	case !f.has("step"):
		d.errAt(n, child(path, "step"), "required: the durable file operation of the call the worker is killed right after (1-based)")
		good = false
	case ft.Step < 1:
		bad("step", "step must be 1 or more, got %d", ft.Step)
	}
	// A server killed after the last step of a call dies with the commit
	// durable and its answer unsent: a window of its own.
	if f.has("of") && (ft.Of < ft.Step || ft.Of == ft.Step && ft.Server == "") {
		bad("of", "of (the durable steps the call took) must be more than step %d: after its last step the call has no gap left, got %d", ft.Step, ft.Of)
	}
	return ft, good
}

// parsePoint accepts a catalogue point or a store-declared window's name
// ("<store>/<window>", see faults.At).
func parsePoint(s string) (faults.Point, error) {
	p, err := faults.ParsePoint(s)
	if err != nil && faults.IsStorePoint(faults.Point(s)) {
		return faults.Point(s), faults.ValidateStorePoint(faults.Point(s))
	}
	return p, err
}

// decodeMeanwhile decodes {worker, does}: what another worker must do
// while this step stalls.
func (d *decoder) decodeMeanwhile(n ast.Node, path string) *catalogue.Meanwhile {
	n, ok := d.plain(n, path)
	if !ok {
		return nil
	}
	f, ok := d.mapping(n, path, meanwhileFields)
	if !ok {
		return nil
	}
	m := &catalogue.Meanwhile{Worker: d.str(f, "worker"), Does: catalogue.Deed(d.str(f, "does"))}
	if m.Worker == "" {
		d.errAt(n, child(path, "worker"), "required: the worker that acts while this one stalls")
		return nil
	}
	if !slices.Contains(catalogue.Deeds, m.Does) {
		d.errAt(n, child(path, "does"), "does %q: want one of %v", m.Does, catalogue.Deeds)
		return nil
	}
	return m
}

// decodeKill decodes a random-instant kill: {seed, offset, base}; offset
// (required, positive, microseconds at the finest) is what a replay uses.
func (d *decoder) decodeKill(n ast.Node, path string) *catalogue.RandomKill {
	n, ok := d.plain(n, path)
	if !ok {
		return nil
	}
	f, ok := d.mapping(n, path, killFields)
	if !ok {
		return nil
	}
	k := &catalogue.RandomKill{Seed: d.integer(f, "seed")}
	micros := func(key string, required bool) (time.Duration, bool) {
		if !f.has(key) {
			if required {
				d.errAt(n, child(path, key), "required: how long after its start the worker is killed (a duration such as 97.065ms)")
			}
			return 0, !required
		}
		s := d.str(f, key)
		v, err := time.ParseDuration(s)
		switch {
		case err != nil || v <= 0:
			d.errPath(child(path, key), "bad duration %q (want a positive Go duration such as 97.065ms)", s)
		case v%time.Microsecond != 0:
			d.errPath(child(path, key), "duration %q is finer than a microsecond", s)
		default:
			return v, true
		}
		return 0, false
	}
	off, ok1 := micros("offset", true)
	base, ok2 := micros("base", false)
	if !ok1 || !ok2 {
		return nil
	}
	if f.has("after") || f.has("afterIndex") || f.has("delta") {
		k.After, k.AfterIndex = d.str(f, "after"), int(d.integer(f, "afterIndex"))
		if k.After == "" {
			d.errAt(n, child(path, "after"), "required with afterIndex and delta: the trace line of the record the kill follows")
			return nil
		}
		if k.AfterIndex < 1 {
			d.errAt(n, child(path, "afterIndex"), "required with after: which occurrence of that record (1-based)")
			return nil
		}
		s := d.str(f, "delta")
		v, err := time.ParseDuration(s)
		if err != nil || v < 0 || v%time.Microsecond != 0 {
			d.errAt(n, child(path, "delta"), "want how long after that record the kill comes, a duration of whole microseconds (0s or more), got %q", s)
			return nil
		}
		k.Delta = v
	}
	if base != 0 && off > base {
		d.errPath(child(path, "offset"), "offset %s is beyond base %s (the fault-free run it was drawn from)", off, base)
		return nil
	}
	k.Offset, k.Base = off, base
	return k
}

func (d *decoder) decodeExpect(s *Scenario, top fields) {
	n, ok := d.plain(top.vals["expect"], "expect")
	if !ok {
		return
	}
	if n == nil {
		d.errAt(d.keyAt("expect"), "expect", "required: verdict pass or fail, with holds and breaks")
		return
	}
	f, ok := d.mapping(n, "expect", expectFields)
	if !ok {
		return
	}
	switch s.Expect.Verdict = d.str(f, "verdict"); s.Expect.Verdict {
	case ExpectPass, ExpectFail:
	case "":
		d.errAt(n, "expect.verdict", "required (pass or fail)")
	default:
		d.errPath("expect.verdict", "unknown verdict %q (want pass or fail)", s.Expect.Verdict)
	}
	invs := func(key string) []check.Invariant {
		names, _ := d.strList(f, key)
		var out []check.Invariant
		for i, nm := range names {
			p := index(child("expect", key), i)
			inv, err := check.ParseInvariant(nm)
			switch {
			case err != nil:
				d.errPath(p, "%v", err)
			case slices.Contains(out, inv):
				d.errPath(p, "%s listed twice", inv.Short())
			default:
				out = append(out, inv)
			}
		}
		return out
	}
	s.Expect.Holds, s.Expect.Breaks = invs("holds"), invs("breaks")
	for i, inv := range s.Expect.Breaks {
		if slices.Contains(s.Expect.Holds, inv) {
			d.errPath(index("expect.breaks", i), "%s is listed in both holds and breaks", inv.Short())
		}
	}
	switch s.Expect.Verdict {
	case ExpectFail:
		if len(s.Expect.Breaks) == 0 {
			d.errAt(d.keyAt("expect.verdict"), "expect.breaks", "verdict fail needs at least one invariant in breaks")
		}
	case ExpectPass:
		if len(s.Expect.Breaks) > 0 {
			d.errPath("expect.breaks", "verdict pass expects no broken invariant; breaks must be empty")
		}
	}
}

// syntaxError turns a goccy/go-yaml parse error into a FieldError. A
// syntax error has no field path of its own: the top-level field around
// the line is given.
func (d *decoder) syntaxError(err error) {
	fe := &FieldError{File: d.file, Msg: "yaml: " + err.Error()}
	var te interface {
		GetToken() *token.Token
		GetMessage() string
	}
	if errors.As(err, &te) {
		fe.Msg = "yaml: " + te.GetMessage()
		fe.Line, fe.Column = tokPos(te.GetToken())
		fe.Path = topFieldAt(d.src, fe.Line)
	}
	d.errs = append(d.errs, fe)
}

// topFieldAt finds the top-level key whose block holds line.
func topFieldAt(src []byte, line int) string {
	lines := strings.Split(string(src), "\n")
	for i := min(line, len(lines)) - 1; i >= 0; i-- {
		l := lines[i]
		if l == "" || l[0] == ' ' || l[0] == '\t' || l[0] == '#' || l[0] == '-' {
			continue
		}
		if k, _, ok := strings.Cut(l, ":"); ok && !strings.ContainsAny(k, " \"'{[") {
			return k
		}
		return ""
	}
	return ""
}
