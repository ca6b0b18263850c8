// Package serviceproc implements the service protocol
// (docs/service-protocol.md): crashmatrix runs an ingestion service
// written in any language as a child process of each worker, sends it
// the worker's intents and answers what it asks while it works (its crash
// windows, its model calls, the time, the harness's stores, the calls to
// its own stores), newline-delimited JSON over its stdin and stdout, as
// the store protocol does (adapters/storeproc, whose process handling it
// shares). Service is the harness's side; Speaker the service's side,
// for a service written in Go (the reference run through the protocol).
package serviceproc

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Protocol is the protocol version this package speaks.
const Protocol = "crashmatrix-service/1"

// Environment variables a service process gets besides the store's.
const (
	EnvDir       = "CRASHMATRIX_SERVICE_DIR"
	EnvNamespace = "CRASHMATRIX_SERVICE_NAMESPACE"
)

// Roles a process is greeted with.
const (
	RoleWorker = "worker"
	RoleRead   = "read"
)

// What a service may report about itself (hello's reports).
const (
	ReportEvents = "events"
	ReportCalls  = "calls"
)

// Systems a service may implement.
const (
	SystemIngestion = "ingestion"
	SystemPlanSave  = "plansave"
)

// Hello is the arguments of hello.
type Hello struct {
	Protocol       string   `json:"protocol"`
	Role           string   `json:"role"`
	Dir            string   `json:"dir"`
	Namespace      string   `json:"namespace"`
	Space          string   `json:"space"`
	Holder         string   `json:"holder"`
	Bugs           []string `json:"bugs"`
	LeaseTTLMillis int64    `json:"leaseTtlMillis"`
	ClaimTTLMillis int64    `json:"claimTtlMillis"`
	BatchSize      int      `json:"batchSize"`
	Seed           int64    `json:"seed"`
}

// Declared is the hello reply: what the service is and what the harness
// can see of it.
type Declared struct {
	Protocol      string   `json:"protocol"`
	Name          string   `json:"name"`
	Systems       []string `json:"systems"`
	Windows       []string `json:"windows"`
	HarnessStores []string `json:"harnessStores"`
	Reports       []string `json:"reports"`
	Clock         string   `json:"clock"`
}

// Has says whether the service declared report r (ReportEvents, ReportCalls).
func (d Declared) Has(r string) bool { return slices.Contains(d.Reports, r) }

// HarnessStore says whether store s is the harness's.
func (d Declared) HarnessStore(s string) bool { return slices.Contains(d.HarnessStores, s) }

// OwnStores are the stores of System A and B the service keeps itself.
func (d Declared) OwnStores() []string {
	var out []string
	for _, s := range []string{storeproc.StoreOperations, storeproc.StoreStates, storeproc.StoreRegistry, storeproc.StoreGraph, storeproc.StoreLocks, storeproc.StoreCheckpoints, storeproc.StorePlans} {
		if !d.HarnessStore(s) {
			out = append(out, s)
		}
	}
	return out
}

// Same reports whether e declares what d does ("" if so).
func (d Declared) Same(e Declared) string {
	switch {
	case d.Name != e.Name:
		return fmt.Sprintf("name %q, the first process declared %q", e.Name, d.Name)
	case !slices.Equal(d.Systems, e.Systems):
		return fmt.Sprintf("systems %v, the first process declared %v", e.Systems, d.Systems)
	case !slices.Equal(d.Windows, e.Windows):
		return fmt.Sprintf("windows %v, the first process declared %v", e.Windows, d.Windows)
	case !slices.Equal(d.HarnessStores, e.HarnessStores):
		return fmt.Sprintf("harnessStores %v, the first process declared %v", e.HarnessStores, d.HarnessStores)
	case !slices.Equal(d.Reports, e.Reports):
		return fmt.Sprintf("reports %v, the first process declared %v", e.Reports, d.Reports)
	case d.Clock != e.Clock:
		return fmt.Sprintf("clock %q, the first process declared %q", e.Clock, d.Clock)
	}
	return ""
}

// check judges a hello reply ("" when it is fine).
func (d Declared) check() string {
	if d.Protocol != Protocol {
		return fmt.Sprintf("the hello reply speaks protocol %q, crashmatrix speaks %q", d.Protocol, Protocol)
	}
	if strings.TrimSpace(d.Name) == "" {
		return "the hello reply has no name"
	}
	if len(d.Systems) == 0 {
		return "the hello reply declares no systems (ingestion, plansave)"
	}
	for _, s := range d.Systems {
		if s != SystemIngestion && s != SystemPlanSave {
			return fmt.Sprintf("the hello reply declares system %q (known: ingestion, plansave)", s)
		}
	}
	for _, w := range d.Windows {
		if err := ValidateWindow(w); err != nil {
			return "the hello reply declares " + err.Error()
		}
		if w == string(faults.LeaseAcquire) && !d.HarnessStore(storeproc.StoreLocks) {
			return "the hello reply declares window leaseAcquire without the harness's locks (harnessStores): its lease faults act on the harness's lock provider"
		}
	}
	for _, s := range d.HarnessStores {
		if storeproc.StoreOfOp(storeOpPrefix(s)+".x") != s {
			return fmt.Sprintf("the hello reply declares harness store %q (known: operations, states, registry, graph, locks, checkpoints, plans)", s)
		}
	}
	for _, r := range d.Reports {
		if r != ReportEvents && r != ReportCalls {
			return fmt.Sprintf("the hello reply declares report %q (known: events, calls)", r)
		}
	}
	if d.Clock != "harness" && d.Clock != "own" {
		return fmt.Sprintf("the hello reply declares clock %q (want harness or own)", d.Clock)
	}
	return ""
}

// storeOpPrefix is the operation prefix of a store ("operations" → "ops").
func storeOpPrefix(s string) string {
	if s == storeproc.StoreOperations {
		return "ops"
	}
	return s
}

// ValidateWindow checks a window name: a catalogue window, or
// "service/<name>".
func ValidateWindow(w string) error {
	if name, ok := strings.CutPrefix(w, "service/"); ok {
		if name == "" || strings.ContainsFunc(name, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
		}) {
			return fmt.Errorf("window %q: want service/<name> of letters, digits, '_', '-', '.'", w)
		}
		return nil
	}
	if !catalogueWindow(w) {
		return fmt.Errorf("window %q: neither a window of the catalogue (docs/fault-kinds.md) nor service/<name>", w)
	}
	return nil
}

// Result is what an ingest, retract or resume returned.
type Result struct {
	OperationID string `json:"operationId"`
	Outcome     string `json:"outcome"`
	Revision    int64  `json:"revision"`
}

// RecoverResult is what recover returned.
type RecoverResult struct {
	Rounds int  `json:"rounds"`
	Quiet  bool `json:"quiet"`
}

// ThreadResult is what plansave.start and plansave.invoke returned.
type ThreadResult struct {
	OperationID string `json:"operationId"`
	Status      string `json:"status"`
	Next        string `json:"next"`
	PlanID      int64  `json:"planId"`
}

// ModelRequest is a model callback.
type ModelRequest struct {
	Space       string `json:"space"`
	DocumentID  string `json:"documentId"`
	OperationID string `json:"operationId"`
	Content     string `json:"content"`
}

// Extraction is the model's answer as the protocol spells it.
type Extraction struct {
	Entities  []Entity   `json:"entities"`
	Relations []Relation `json:"relations"`
	Model     string     `json:"model"`
	Call      int        `json:"call"`
}

// Entity is an extracted entity.
type Entity struct {
	Type       string            `json:"type"`
	Name       string            `json:"name"`
	Aliases    []string          `json:"aliases,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
}

// Relation is an extracted relation.
type Relation struct {
	SourceType string            `json:"sourceType"`
	SourceName string            `json:"sourceName"`
	Type       string            `json:"type"`
	TargetType string            `json:"targetType"`
	TargetName string            `json:"targetName"`
	Properties map[string]string `json:"properties,omitempty"`
}

// WireExtraction spells a reference extraction as the protocol does.
func WireExtraction(ex reference.Extraction) Extraction {
	out := Extraction{Entities: []Entity{}, Relations: []Relation{}, Model: ex.Model, Call: ex.Call}
	for _, e := range ex.Entities {
		out.Entities = append(out.Entities, Entity{Type: e.Type, Name: e.Name, Aliases: e.Aliases, Properties: e.Properties})
	}
	for _, r := range ex.Relations {
		out.Relations = append(out.Relations, Relation{SourceType: r.SourceType, SourceName: r.SourceName, Type: r.Type, TargetType: r.TargetType, TargetName: r.TargetName, Properties: r.Properties})
	}
	return out
}

// Reference is the extraction as the reference service takes it.
func (x Extraction) Reference() reference.Extraction {
	out := reference.Extraction{Model: x.Model, Call: x.Call}
	for _, e := range x.Entities {
		out.Entities = append(out.Entities, reference.ExtractedEntity{Type: e.Type, Name: e.Name, Aliases: e.Aliases, Properties: e.Properties})
	}
	for _, r := range x.Relations {
		out.Relations = append(out.Relations, reference.ExtractedRelation{SourceType: r.SourceType, SourceName: r.SourceName, Type: r.Type, TargetType: r.TargetType, TargetName: r.TargetName, Properties: r.Properties})
	}
	return out
}

// message is any line the service sends.
type message struct {
	ID    *int64               `json:"id"`
	OK    json.RawMessage      `json:"ok"`
	Error *storeproc.WireError `json:"error"`
	Event *reference.Event     `json:"event"`
	At    *struct {
		Step  int    `json:"step"`
		Point string `json:"point"`
	} `json:"at"`
	Model *struct {
		Step int `json:"step"`
		ModelRequest
	} `json:"model"`
	Now *struct {
		Step int `json:"step"`
	} `json:"now"`
	Sleep *struct {
		Step   int   `json:"step"`
		Millis int64 `json:"millis"`
	} `json:"sleep"`
	Store *storeCallback `json:"store"`
	Call  *storeCallback `json:"call"`
	Done  *struct {
		Step  int                  `json:"step"`
		Op    string               `json:"op"`
		OK    json.RawMessage      `json:"ok"`
		Error *storeproc.WireError `json:"error"`
	} `json:"done"`
}

type storeCallback struct {
	Step int             `json:"step"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

// kind names the message's one part and its step ("" for a malformed
// message: more or fewer than one part).
func (m *message) kind() (string, int) {
	kind, step, n := "", 0, 0
	set := func(k string, s int) { kind, step = k, s; n++ }
	if m.OK != nil {
		set("ok", 0)
	}
	if m.Error != nil {
		set("error", 0)
	}
	if m.Event != nil {
		set("event", 0)
	}
	if m.At != nil {
		set("at", m.At.Step)
	}
	if m.Model != nil {
		set("model", m.Model.Step)
	}
	if m.Now != nil {
		set("now", m.Now.Step)
	}
	if m.Sleep != nil {
		set("sleep", m.Sleep.Step)
	}
	if m.Store != nil {
		set("store", m.Store.Step)
	}
	if m.Call != nil {
		set("call", m.Call.Step)
	}
	if m.Done != nil {
		set("done", m.Done.Step)
	}
	if n != 1 || m.ID == nil {
		return "", 0
	}
	return kind, step
}

// catalogueWindow reports whether w is a window of the catalogue.
func catalogueWindow(w string) bool {
	for _, s := range faults.Catalogue {
		if string(s.Point) == w {
			return true
		}
	}
	return false
}
