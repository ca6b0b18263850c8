package reference

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// ExtractRequest is one model call: extract entities and relations of one
// document under one operationId.
type ExtractRequest struct {
	Space       string
	DocumentID  string
	OperationID string
	Content     string
}

// ExtractedEntity is an entity the model found.
type ExtractedEntity struct {
	Type       string
	Name       string
	Aliases    []string
	Properties map[string]string
}

// ExtractedRelation is a relation between two extracted entities.
type ExtractedRelation struct {
	SourceType, SourceName string
	Type                   string
	TargetType, TargetName string
	Properties             map[string]string
}

// Extraction is the model's answer.
type Extraction struct {
	Entities  []ExtractedEntity
	Relations []ExtractedRelation
	// Model names the model and prompt version (the extraction fingerprint
	// of the committed state).
	Model string
	// Call is the ordinal of this call for its operationId (1 = first).
	Call int
}

// Extractor is the language model.
type Extractor interface {
	Extract(ctx context.Context, req ExtractRequest) (Extraction, error)
}

// CallLog durably counts model calls per operationId; the harness owns it,
// so it survives the crashes of the system under test.
type CallLog interface {
	// Record notes one more call for operationID and returns its ordinal.
	Record(operationID string) (int, error)
}

// MemoryCallLog is a CallLog for a single process.
type MemoryCallLog struct {
	mu sync.Mutex
	n  map[string]int
}

// Record implements CallLog.
func (l *MemoryCallLog) Record(op string) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[op]++
	return l.n[op], nil
}

// Calls returns the number of calls recorded for op.
func (l *MemoryCallLog) Calls(op string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[op]
}

// FakeModel is the name the fake extractor reports as its model.
const FakeModel = "crashmatrix-fake-model/v1"

// FakeExtractor is a deterministic stand-in for a language model. It reads
// documents written one statement a line:
//
//	Person:Alice                      an entity
//	Person:Alice {age=30, city=Oslo}  an entity with properties
//	Person:Alice -KNOWS-> Person:Bob  a relation (both entities implied)
//	Person:Alice aka Ally, A.         an entity with aliases
//	# comment
//
// Its answer to the first call for an operationId is a pure function of
// the content. A second or later call for the same operationId answers
// differently (every entity carries "call=N"), as a real model may: a plan
// made from a re-call under a used operationId has another fingerprint. It
// counts every call in Log.
type FakeExtractor struct {
	Log CallLog
}

// Extract implements Extractor.
func (f *FakeExtractor) Extract(ctx context.Context, req ExtractRequest) (Extraction, error) {
	if err := ctx.Err(); err != nil {
		return Extraction{}, err
	}
	call := 1
	if f.Log != nil {
		n, err := f.Log.Record(req.OperationID)
		if err != nil {
			return Extraction{}, fmt.Errorf("model call log: %w", err)
		}
		call = n
	}
	ex, err := ParseFakeDocument(req.Content)
	if err != nil {
		return Extraction{}, fmt.Errorf("document %s/%s: %w", req.Space, req.DocumentID, err)
	}
	ex.Model, ex.Call = FakeModel, call
	if call > 1 {
		for i := range ex.Entities {
			if ex.Entities[i].Properties == nil {
				ex.Entities[i].Properties = map[string]string{}
			}
			ex.Entities[i].Properties["call"] = fmt.Sprint(call)
		}
	}
	return ex, nil
}

// ParseFakeDocument parses the fake extractor's document language.
func ParseFakeDocument(content string) (Extraction, error) {
	var ex Extraction
	index := map[string]int{}
	addEntity := func(line int, spec string) (ExtractedEntity, error) {
		spec = strings.TrimSpace(spec)
		props := map[string]string{}
		if i := strings.IndexByte(spec, '{'); i >= 0 {
			if !strings.HasSuffix(spec, "}") {
				return ExtractedEntity{}, fmt.Errorf("line %d: unclosed '{' in %q", line, spec)
			}
			for _, kv := range strings.Split(spec[i+1:len(spec)-1], ",") {
				if strings.TrimSpace(kv) == "" {
					continue
				}
				k, v, ok := strings.Cut(kv, "=")
				if !ok || strings.TrimSpace(k) == "" {
					return ExtractedEntity{}, fmt.Errorf("line %d: property %q is not key=value", line, kv)
				}
				props[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
			spec = strings.TrimSpace(spec[:i])
		}
		var aliases []string
		if i := strings.Index(spec, " aka "); i >= 0 {
			for _, a := range strings.Split(spec[i+5:], ",") {
				if a = strings.TrimSpace(a); a != "" {
					aliases = append(aliases, a)
				}
			}
			spec = strings.TrimSpace(spec[:i])
		}
		typ, name, ok := strings.Cut(spec, ":")
		typ, name = strings.TrimSpace(typ), strings.TrimSpace(name)
		if !ok || typ == "" || name == "" {
			return ExtractedEntity{}, fmt.Errorf("line %d: entity %q is not Type:Name", line, spec)
		}
		key := Normalize(typ) + "\n" + Normalize(name)
		if j, seen := index[key]; seen {
			e := &ex.Entities[j]
			for k, v := range props {
				if e.Properties == nil {
					e.Properties = map[string]string{}
				}
				e.Properties[k] = v
			}
			e.Aliases = mergeNames(e.Aliases, aliases)
			return *e, nil
		}
		e := ExtractedEntity{Type: typ, Name: name, Aliases: aliases}
		if len(props) > 0 {
			e.Properties = props
		}
		index[key] = len(ex.Entities)
		ex.Entities = append(ex.Entities, e)
		return e, nil
	}
	for n, raw := range strings.Split(content, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.Index(line, " -"); i >= 0 && strings.Contains(line[i:], "-> ") {
			rest := line[i+2:]
			j := strings.Index(rest, "-> ")
			if j < 0 {
				return ex, fmt.Errorf("line %d: relation without a type (want Type:A -REL-> Type:B)", n+1)
			}
			relType := strings.TrimSpace(rest[:j])
			if relType == "" {
				return ex, fmt.Errorf("line %d: relation without a type", n+1)
			}
			src, err := addEntity(n+1, line[:i])
			if err != nil {
				return ex, err
			}
			dst, err := addEntity(n+1, rest[j+3:])
			if err != nil {
				return ex, err
			}
			ex.Relations = append(ex.Relations, ExtractedRelation{
				SourceType: src.Type, SourceName: src.Name, Type: relType,
				TargetType: dst.Type, TargetName: dst.Name,
			})
			continue
		}
		if _, err := addEntity(n+1, line); err != nil {
			return ex, err
		}
	}
	return ex, nil
}

func mergeNames(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range append(append([]string(nil), a...), b...) {
		if k := Normalize(s); !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
