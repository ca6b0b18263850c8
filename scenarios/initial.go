package scenarios

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/initial"
)

// decodeInitial decodes the initial block: strictly (unknown fields,
// wrong types, anchors are errors, each at its line and column), then
// checked against the protocol's rules (initial.State.Validate), each
// problem at the field it concerns.
func (d *decoder) decodeInitial(s *Scenario, top fields) {
	n, ok := d.plain(top.vals["initial"], "initial")
	if !ok || n == nil {
		return
	}
	if s.System != faults.Ingestion {
		d.errAt(d.keyAt("initial"), "initial", "an initial state holds System A's stores; it does not apply to system %s", s.System)
		return
	}
	if s.Backend == "memory" {
		d.errAt(d.keyAt("initial"), "initial", "backend memory is volatile: every worker starts from empty stores, so no initial state reaches the steps")
	}
	if _, ok := n.(*ast.MappingNode); !ok {
		d.errAt(n, "initial", "want a mapping, got %s", kindName(n))
		return
	}
	if !d.register(n, "initial") {
		return
	}
	st := &initial.State{}
	if err := yaml.NodeToValue(n, st, yaml.DisallowUnknownField()); err != nil {
		d.yamlError(err)
		return
	}
	for _, p := range st.Validate() {
		d.errPath("initial."+p.Path, "%s", p.Msg)
	}
	st.Normalize()
	s.Initial = st
}

// register records the value and key node of every field path under n
// (so that errors point at them) and reports anchors, aliases and tags.
func (d *decoder) register(n ast.Node, path string) bool {
	ok := true
	switch v := n.(type) {
	case *ast.AnchorNode, *ast.AliasNode, *ast.TagNode, *ast.MergeKeyNode:
		_, ok = d.plain(n, path)
		return ok
	case *ast.MappingNode:
		for _, mv := range v.Values {
			if _, isMerge := mv.Key.(*ast.MergeKeyNode); isMerge {
				d.plain(mv.Key, path)
				ok = false
				continue
			}
			p := child(path, mv.Key.GetToken().Value)
			d.nodes[p] = mv.Value
			if d.keys == nil {
				d.keys = map[string]ast.Node{}
			}
			d.keys[p] = mv.Key
			ok = d.register(mv.Value, p) && ok
		}
	case *ast.SequenceNode:
		for i, x := range v.Values {
			p := index(path, i)
			d.nodes[p] = x
			ok = d.register(x, p) && ok
		}
	}
	return ok
}

// yamlError turns a decoding error inside the initial block into a
// FieldError at the token it names, with the path of the field there.
func (d *decoder) yamlError(err error) {
	fe := &FieldError{File: d.file, Path: "initial", Msg: err.Error()}
	var ye yaml.Error
	if errors.As(err, &ye) {
		fe.Msg = ye.GetMessage()
		fe.Line, fe.Column = tokPos(ye.GetToken())
		if p := d.pathAt(ye.GetToken()); p != "" {
			fe.Path = p
		}
	}
	d.errs = append(d.errs, fe)
}

// pathAt is the longest registered initial path whose key or value starts
// at the token's position.
func (d *decoder) pathAt(t *token.Token) string {
	line, col := tokPos(t)
	best := ""
	for _, m := range []map[string]ast.Node{d.keys, d.nodes} {
		for p, n := range m {
			if !strings.HasPrefix(p, "initial") {
				continue
			}
			if l, c := tokPos(n.GetToken()); l == line && c == col && len(p) > len(best) {
				best = p
			}
		}
	}
	return best
}

// marshalInitial writes the initial block, indented under its key.
func marshalInitial(st *initial.State) (string, error) {
	out, err := yaml.MarshalWithOptions(st, yaml.Indent(2), yaml.IndentSequence(true), yaml.UseLiteralStyleIfMultiline(true))
	if err != nil {
		return "", fmt.Errorf("initial: %w", err)
	}
	var b strings.Builder
	b.WriteString("initial:\n")
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if l == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString("  " + l + "\n")
	}
	return b.String(), nil
}

// FromState returns a scenario that starts from st and lets recovery
// finish what it holds: a recover worker, then the quiesce worker. It
// expects every invariant to hold; a state that breaks one then replays
// as a failing scenario naming it (or write the expectation in).
func FromState(name, description string, st *initial.State) *Scenario {
	return &Scenario{Name: name, Description: description, System: faults.Ingestion, Initial: st,
		Steps: []Step{
			{Worker: "recover", Actions: []Action{{Do: "recover", Rounds: DefaultRounds}}, ContinueOnError: true},
			{Worker: QuiesceWorker, Actions: []Action{{Do: "recover", Rounds: DefaultRounds}}, ContinueOnError: true},
		},
		Expect: Expect{Verdict: ExpectPass, Holds: slices.Clone(check.All)}}
}
