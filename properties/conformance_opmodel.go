package properties

import (
	"errors"
	"fmt"
	"math/rand"
	"sort"

	"github.com/crashmatrix/crashmatrix/reference"
)

// opModelStore is the reference model of one OperationStore: a map of records
// and their claims, and a clock that only moves forward.
type opModelStore struct {
	s     reference.OperationStore
	clock int64
	ops   map[string]*opModelRec
}

type opModelRec struct {
	op      reference.Operation
	fp      string
	holder  string
	expires int64
}

func opModelIDs() []string { return []string{"op-1", "op-2", "op-3", "op-4"} }

// opModel runs random command sequences against fresh stores and the model.
func opModel(t suiteT, fresh func() reference.OperationStore) {
	prop := confModelProp(t, func() *opModelStore {
		return &opModelStore{s: fresh(), clock: confNow, ops: map[string]*opModelRec{}}
	}, opModelPick)
	confCheckProp(t, "OperationStore commands", prop, 40, 40)
}

func opModelPick(r *rand.Rand) *confStep[*opModelStore] {
	id := confOneOf(r, opModelIDs()...)
	dt := 2 * int64(1+r.Intn(10)) // even: claim expiries are odd, so never tie
	switch k := r.Intn(100); {
	case k < 18:
		doc := confOneOf(r, "doc-1", "doc-2")
		exp := int64(r.Intn(2))
		return &confStep[*opModelStore]{fmt.Sprintf("CreateIfAbsent(%s, %s, rev %d, +%d)", id, doc, exp, dt), func(m *opModelStore) string {
			return m.create(id, doc, exp, dt)
		}}
	case k < 26:
		return &confStep[*opModelStore]{fmt.Sprintf("Get(%s)", id), func(m *opModelStore) string { return m.get(id) }}
	case k < 30:
		return &confStep[*opModelStore]{fmt.Sprintf("GetPlan(%s)", id), func(m *opModelStore) string { return m.getPlan(id) }}
	case k < 70:
		c := opModelCAS{
			id: id, dt: dt,
			variant:  confOneOf(r, "current", "current", "current", "current", "wrongStage", "wrongAttempts", "wrongFingerprint", "backwards"),
			legal:    r.Intn(4) != 0,
			pick:     r.Intn(2),
			stage:    confOneOf(r, reference.Stages...),
			inc:      confOneOf(r, 0, 0, 1),
			reason:   confOneOf(r, "", "timeout", "reset"),
			disp:     confOneOf(r, reference.Active, reference.Active, reference.Active, reference.Active, reference.Active, reference.DeadLetter, reference.Abandoned),
			identity: r.Intn(12) == 0,
		}
		return &confStep[*opModelStore]{c.String(), func(m *opModelStore) string { return m.cas(c) }}
	case k < 80:
		limit := 1 + r.Intn(5)
		return &confStep[*opModelStore]{fmt.Sprintf("ListRecoverable(%d)", limit), func(m *opModelStore) string { return m.listRecoverable(limit) }}
	case k < 92:
		holder := confOneOf(r, "A", "B")
		ttl := confOneOf(r, int64(15), int64(41), int64(1001))
		return &confStep[*opModelStore]{fmt.Sprintf("Claim(%s, %s, +%d, ttl %d)", id, holder, dt, ttl), func(m *opModelStore) string {
			return m.claim(id, holder, dt, ttl)
		}}
	default:
		holder := confOneOf(r, "A", "B")
		return &confStep[*opModelStore]{fmt.Sprintf("ReleaseClaim(%s, %s)", id, holder), func(m *opModelStore) string { return m.release(id, holder) }}
	}
}

func (m *opModelStore) create(id, doc string, exp, dt int64) string {
	m.clock += dt
	p := confPlan(id, "space_a", doc, exp)
	op := confOp(p, m.clock)
	ok, err := m.s.CreateIfAbsent(confCtx, op, p)
	_, exists := m.ops[id]
	if err != nil || ok == exists {
		return confMismatch("CreateIfAbsent", fmt.Sprintf("%v, nil (exists=%v)", !exists, exists), fmt.Sprintf("%v, %v", ok, err))
	}
	if !exists {
		m.ops[id] = &opModelRec{op: op, fp: op.PlanFingerprint}
	}
	return ""
}

func (m *opModelStore) get(id string) string {
	got, err := m.s.Get(confCtx, id)
	rec, exists := m.ops[id]
	if !exists {
		if !errors.Is(err, reference.ErrNotFound) {
			return confMismatch("Get of an absent id", "ErrNotFound", fmt.Sprintf("%s, %v", confShow(got), err))
		}
		return ""
	}
	if err != nil || !confEqual(confMutable(got), rec.op) {
		return confMismatchAt("Get", rec.op, confMutable(got), err)
	}
	return ""
}

func (m *opModelStore) getPlan(id string) string {
	p, err := m.s.GetPlan(confCtx, id)
	rec, exists := m.ops[id]
	if !exists {
		if !errors.Is(err, reference.ErrNotFound) {
			return confMismatch("GetPlan of an absent id", "ErrNotFound", err)
		}
		return ""
	}
	if err != nil || reference.Fingerprint(p) != rec.fp {
		return confMismatch("GetPlan fingerprint", rec.fp, fmt.Sprintf("%s, %v", reference.Fingerprint(p), err))
	}
	return ""
}

type opModelCAS struct {
	id       string
	dt       int64
	variant  string
	legal    bool
	pick     int
	stage    reference.Stage
	inc      int
	reason   string
	disp     reference.Disposition
	identity bool
}

// String describes the step for gopter's counterexample.
func (c opModelCAS) String() string {
	to := string(c.stage)
	if c.legal {
		to = fmt.Sprintf("legal successor #%d", c.pick)
	}
	return fmt.Sprintf("CompareAndSet(%s, expected=%s, to %s, +%d, attempts+%d, reason %q, disposition %q, changeIdentity=%v)",
		c.id, c.variant, to, c.dt, c.inc, c.reason, c.disp, c.identity)
}

func opLegalSuccessors(s reference.Stage) []reference.Stage {
	var out []reference.Stage
	for _, to := range reference.Stages {
		if s.CanTransition(to) {
			out = append(out, to)
		}
	}
	return out
}

func (m *opModelStore) cas(c opModelCAS) string {
	rec, exists := m.ops[c.id]
	if !exists {
		p := confPlan(c.id, "space_a", "doc-1", 0)
		exp := confOp(p, m.clock)
		ok, _ := m.s.CompareAndSet(confCtx, exp, opAdvance(exp, reference.GraphApplied, m.clock, "", 0))
		if ok {
			return confMismatch("CompareAndSet on an absent id", "false", "true")
		}
		return ""
	}
	cur := rec.op
	expected := cur
	switch c.variant {
	case "wrongStage":
		for _, s := range reference.Stages {
			if s != cur.Stage {
				expected.Stage = s
				break
			}
		}
	case "wrongAttempts":
		expected.Attempts++
	case "wrongFingerprint":
		expected.PlanFingerprint = reference.Fingerprint(confPlan(c.id, "space_a", "doc-9", 0))
	}
	next := expected
	next.Stage = c.stage
	if succ := opLegalSuccessors(expected.Stage); c.legal && len(succ) > 0 {
		next.Stage = succ[c.pick%len(succ)]
	}
	next.UpdatedAt = m.clock + c.dt
	if c.variant == "backwards" {
		next.UpdatedAt = cur.UpdatedAt - 1
	}
	next.Attempts = expected.Attempts + c.inc
	next.FailureReason = c.reason
	next.Disposition = c.disp
	if c.identity {
		next.DocumentID = "doc-other"
	}
	ok, err := m.s.CompareAndSet(confCtx, expected, next)
	matches := expected.SameIdentity(cur) && expected.Stage == cur.Stage && expected.Attempts == cur.Attempts && expected.Disposition == cur.Disposition
	if !matches {
		// The stored record differs: false. (An implementation that
		// validates next against expected first may also report an error;
		// either way nothing may change.)
		if ok {
			return confMismatch("CompareAndSet with a stale expectation", "false", fmt.Sprintf("true, %v", err))
		}
		return m.get(c.id)
	}
	if verr := reference.ValidateUpdate(cur, next); verr != nil {
		if ok || err == nil {
			return confMismatch("CompareAndSet to an illegal successor", fmt.Sprintf("false, error like %q", verr), fmt.Sprintf("%v, %v", ok, err))
		}
		for _, sentinel := range []error{reference.ErrIllegalTransition, reference.ErrTimeBackwards, reference.ErrIdentityMismatch, reference.ErrUnknownStage} {
			if errors.Is(verr, sentinel) && !errors.Is(err, sentinel) {
				return confMismatch("CompareAndSet error kind", verr, err)
			}
		}
		return m.get(c.id)
	}
	if !ok || err != nil {
		return confMismatch("CompareAndSet with the current record to a legal successor", "true, nil", fmt.Sprintf("%v, %v", ok, err))
	}
	n := next
	n.ClaimHolder, n.ClaimExpiresAt = "", 0
	rec.op = n
	m.clock = max(m.clock, next.UpdatedAt)
	return m.get(c.id)
}

func (m *opModelStore) listRecoverable(limit int) string {
	var want []reference.Operation
	for _, r := range m.ops {
		if !r.op.Finished() {
			want = append(want, r.op)
		}
	}
	sort.Slice(want, func(i, j int) bool {
		if want[i].UpdatedAt != want[j].UpdatedAt {
			return want[i].UpdatedAt < want[j].UpdatedAt
		}
		return want[i].OperationID < want[j].OperationID
	})
	if len(want) > limit {
		want = want[:limit]
	}
	got, err := m.s.ListRecoverable(confCtx, limit)
	stripped := make([]reference.Operation, len(got))
	for i, o := range got {
		stripped[i] = confMutable(o)
	}
	if err != nil || !confEqual(stripped, want) {
		return confMismatchAt("ListRecoverable", want, stripped, err)
	}
	return ""
}

func (m *opModelStore) claim(id, holder string, dt, ttl int64) string {
	m.clock += dt
	at := m.clock
	ok, err := m.s.Claim(confCtx, id, holder, at, ttl)
	rec, exists := m.ops[id]
	if !exists {
		if ok {
			return confMismatch("Claim of an absent operation", "false or an error", "true")
		}
		return ""
	}
	if err != nil {
		return confMismatch("Claim", "no error", err)
	}
	live := rec.holder != "" && at < rec.expires
	want := !live || rec.holder == holder
	if rec.op.Finished() && !ok {
		return "" // claiming a finished operation is allowed to fail
	}
	if ok != want {
		return confMismatch(fmt.Sprintf("Claim at %d (model: holder %q until %d)", at, rec.holder, rec.expires), want, ok)
	}
	if ok {
		rec.holder, rec.expires = holder, at+ttl
	}
	return ""
}

func (m *opModelStore) release(id, holder string) string {
	ok, err := m.s.ReleaseClaim(confCtx, id, holder)
	rec, exists := m.ops[id]
	if !exists {
		if ok {
			return confMismatch("ReleaseClaim of an absent operation", "false or an error", "true")
		}
		return ""
	}
	if err != nil {
		return confMismatch("ReleaseClaim", "no error", err)
	}
	switch {
	case rec.holder != holder:
		if ok {
			return confMismatch(fmt.Sprintf("ReleaseClaim by %s (model holder %q)", holder, rec.holder), false, true)
		}
	case m.clock < rec.expires:
		if !ok {
			return confMismatch(fmt.Sprintf("ReleaseClaim by the live holder %s", holder), true, false)
		}
		rec.holder = ""
	default:
		// The holder's claim expired: releasing it may succeed or not,
		// and either way nobody holds it now.
		rec.holder = ""
	}
	return ""
}
