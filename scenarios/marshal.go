package scenarios

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/crashmatrix/crashmatrix/check"
)

// Marshal writes the scenario in canonical form: fields in schema order,
// defaults left out, documents as literal block scalars, actions and
// faults as one flow mapping a line. The output parses back to an equal
// scenario (Marshal checks that before returning).
func (s *Scenario) Marshal() ([]byte, error) {
	n := s.normalized()
	var b strings.Builder
	kv := func(indent, key, val string) { fmt.Fprintf(&b, "%s%s: %s\n", indent, key, val) }
	kv("", "name", scalar(n.Name, false))
	if n.Description != "" {
		if strings.Contains(n.Description, "\n") {
			b.WriteString("description: " + block(n.Description, "  "))
		} else {
			kv("", "description", scalar(n.Description, false))
		}
	}
	kv("", "system", string(n.System))
	if n.Backend != "" {
		kv("", "backend", scalar(n.Backend, false))
	}
	if n.Service != nil {
		b.WriteString("service:\n")
		kv("  ", "command", scalar(n.Service.Command, false))
		if len(n.Service.Bugs) > 0 {
			kv("  ", "bugs", flowList(n.Service.Bugs))
		}
	}
	if len(n.Bugs) > 0 {
		kv("", "bugs", flowList(n.Bugs))
	}
	if n.Mutant != "" {
		kv("", "mutant", scalar(n.Mutant, false))
	}
	if n.Seed != 0 {
		kv("", "seed", strconv.FormatInt(n.Seed, 10))
	}
	if n.LeaseTTL != 0 {
		kv("", "leaseTTL", n.LeaseTTL.String())
	}
	if len(n.Documents) > 0 {
		b.WriteString("documents:\n")
		names := make([]string, 0, len(n.Documents))
		for k := range n.Documents {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			b.WriteString("  " + scalar(k, false) + ": " + block(n.Documents[k], "    "))
		}
	}
	if n.Initial != nil {
		block, err := marshalInitial(n.Initial)
		if err != nil {
			return nil, fmt.Errorf("marshal scenario %s: %w", n.Name, err)
		}
		b.WriteString(block)
	}
	b.WriteString("steps:\n")
	for _, st := range n.Steps {
		kv("  - ", "worker", scalar(st.Worker, false))
		const in = "    "
		if len(st.Actions) > 0 {
			b.WriteString(in + "actions:\n")
			for _, a := range st.Actions {
				b.WriteString(in + "  - " + actionFlow(a) + "\n")
			}
		}
		if len(st.Faults) > 0 {
			b.WriteString(in + "faults:\n")
			for _, f := range st.Faults {
				b.WriteString(in + "  - " + faultFlow(f) + "\n")
			}
		}
		if st.Background {
			kv(in, "background", "true")
		}
		if len(st.Resubmit) > 0 {
			kv(in, "resubmit", flowList(st.Resubmit))
		}
		if st.ExpectHit != nil {
			kv(in, "expectHit", flowList(st.ExpectHit))
		}
		if st.ContinueOnError {
			kv(in, "continueOnError", "true")
		}
		if k := st.Kill; k != nil {
			kill := fmt.Sprintf("{seed: %d, offset: %s", k.Seed, k.Offset)
			if k.Base != 0 {
				kill += ", base: " + k.Base.String()
			}
			if k.After != "" {
				kill += fmt.Sprintf(", after: %s, afterIndex: %d, delta: %s", scalar(k.After, true), k.AfterIndex, k.Delta)
			}
			kv(in, "kill", kill+"}")
		}
		if m := st.Meanwhile; m != nil {
			kv(in, "meanwhile", fmt.Sprintf("{worker: %s, does: %s}", scalar(m.Worker, true), m.Does))
		}
	}
	b.WriteString("expect:\n")
	kv("  ", "verdict", scalar(n.Expect.Verdict, false))
	short := func(is []check.Invariant) []string {
		out := make([]string, len(is))
		for i, x := range is {
			out[i] = x.Short()
		}
		return out
	}
	if len(n.Expect.Holds) > 0 {
		kv("  ", "holds", flowList(short(n.Expect.Holds)))
	}
	if len(n.Expect.Breaks) > 0 {
		kv("  ", "breaks", flowList(short(n.Expect.Breaks)))
	}
	out := []byte(b.String())
	back, err := Parse(n.Name+".yaml", out)
	if err != nil {
		return nil, fmt.Errorf("marshal scenario %s: the output does not load: %w", n.Name, err)
	}
	if !reflect.DeepEqual(back, n) {
		return nil, fmt.Errorf("marshal scenario %s: the output does not load back to the same scenario", n.Name)
	}
	return out, nil
}

// normalized is a copy with Parse's defaults filled in and empty
// collections as Parse leaves them.
func (s *Scenario) normalized() *Scenario {
	n := *s
	n.System = s.system()
	if len(n.Bugs) == 0 {
		n.Bugs = nil
	}
	if n.Service != nil {
		sv := *n.Service
		if len(sv.Bugs) == 0 {
			sv.Bugs = nil
		}
		n.Service = &sv
	}
	if len(n.Documents) == 0 {
		n.Documents = nil
	}
	if n.Initial != nil {
		st := *n.Initial
		st.Normalize()
		n.Initial = &st
	}
	n.Steps = nil
	for _, st := range s.Steps {
		st.Actions = slices.Clone(st.Actions)
		for i := range st.Actions {
			if st.Actions[i].Do == "recover" && st.Actions[i].Rounds == 0 {
				st.Actions[i].Rounds = DefaultRounds
			}
		}
		if len(st.Actions) == 0 {
			st.Actions = nil
		}
		if len(st.Faults) == 0 {
			st.Faults = nil
		}
		if len(st.Resubmit) == 0 {
			st.Resubmit = nil
		}
		n.Steps = append(n.Steps, st)
	}
	if len(n.Expect.Holds) == 0 {
		n.Expect.Holds = nil
	}
	if len(n.Expect.Breaks) == 0 {
		n.Expect.Breaks = nil
	}
	return &n
}

func actionFlow(a Action) string {
	parts := []string{"do: " + scalar(a.Do, true)}
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+": "+scalar(v, true))
		}
	}
	add("doc", a.Doc)
	add("document", a.Document)
	add("op", a.Op)
	if a.Rounds != 0 && !(a.Do == "recover" && a.Rounds == DefaultRounds) {
		parts = append(parts, "rounds: "+strconv.Itoa(a.Rounds))
	}
	add("thread", a.Thread)
	add("owner", a.Owner)
	add("question", a.Question)
	if a.Minutes != 0 {
		parts = append(parts, "minutes: "+strconv.Itoa(a.Minutes))
	}
	if a.Approve {
		parts = append(parts, "approve: true")
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func faultFlow(f Fault) string {
	parts := []string{"point: " + scalar(string(f.Point), true), "kind: " + scalar(string(f.Kind), true)}
	if f.Hit != 1 {
		parts = append(parts, "hit: "+strconv.Itoa(f.Hit))
	}
	if f.Pause != 0 {
		parts = append(parts, "pause: "+f.Pause.String())
	}
	if f.Server != "" {
		parts = append(parts, "server: "+scalar(f.Server, true))
	}
	if f.Tear != 0 {
		parts = append(parts, "tear: "+strconv.Itoa(f.Tear))
	}
	if f.Call != "" {
		parts = append(parts, "call: "+scalar(f.Call, true), "step: "+strconv.Itoa(f.Step))
	}
	if f.Of != 0 {
		parts = append(parts, "of: "+strconv.Itoa(f.Of))
	}
	if f.Syscall != "" {
		parts = append(parts, "syscall: "+scalar(f.Syscall, true))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func flowList[T ~string](xs []T) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = scalar(string(x), true)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// block writes s as a literal block scalar (the header and the indented
// lines), or as a quoted scalar when a block cannot hold it exactly.
func block(s, indent string) string {
	if s == "" || strings.ContainsAny(s, "\r\t") || strings.HasPrefix(s, " ") || strings.HasPrefix(s, "\n") || !strconv.CanBackquote(strings.ReplaceAll(s, "\n", "")) {
		return strconv.Quote(s) + "\n"
	}
	header := "|"
	body := s
	switch {
	case strings.HasSuffix(s, "\n\n"):
		header = "|+"
	case strings.HasSuffix(s, "\n"):
	default:
		header = "|-"
		body += "\n"
	}
	var b strings.Builder
	b.WriteString(header + "\n")
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	for _, l := range lines {
		if l == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString(indent + l + "\n")
	}
	return b.String()
}

var reserved = map[string]bool{"true": true, "false": true, "yes": true, "no": true, "on": true, "off": true, "null": true, "~": true, "y": true, "n": true}

// scalar writes s plain when that is unambiguous, double-quoted otherwise.
func scalar(s string, flow bool) string {
	if plainSafe(s, flow) {
		return s
	}
	return strconv.Quote(s)
}

func plainSafe(s string, flow bool) bool {
	if s == "" || reserved[strings.ToLower(s)] || strings.TrimSpace(s) != s {
		return false
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return false
	}
	if _, err := strconv.ParseInt(s, 0, 64); err == nil {
		return false
	}
	c := s[0]
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '/' || c == '(') {
		return false
	}
	if c >= '0' && c <= '9' && strings.Count(s, "-") >= 2 {
		return false // may read as a date
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune(" ._/-+=()?'!;", r):
		case r == ',' && !flow:
		case r > 127 && r != 0xFEFF && r != 0x85 && r != 0x2028 && r != 0x2029:
		default:
			return false
		}
	}
	return true
}
