package properties

import (
	"fmt"
	"math/rand"
	"strings"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
)

// confStep is one command of a model-based test: run applies it to the
// system under test (which carries its own model) and returns a description
// of any disagreement between store and model, or "".
type confStep[H any] struct {
	desc string
	run  func(h H) string
}

// Run applies the step; the result is the mismatch text.
func (c *confStep[H]) Run(sut commands.SystemUnderTest) commands.Result {
	h := sut.(*confHarness[H])
	h.n++
	if msg := c.run(h.h); msg != "" {
		return fmt.Sprintf("step %d %s: %s", h.n, c.desc, msg)
	}
	return ""
}

// NextState keeps the (trivial) generation state: each step reads the
// model inside the system under test, so shrinking never makes a step stale.
func (c *confStep[H]) NextState(s commands.State) commands.State { return s }

// PreCondition accepts every step.
func (c *confStep[H]) PreCondition(commands.State) bool { return true }

// PostCondition fails the property on a store/model mismatch.
func (c *confStep[H]) PostCondition(_ commands.State, r commands.Result) *gopter.PropResult {
	if msg, _ := r.(string); msg != "" {
		return gopter.NewPropResult(false, msg)
	}
	return gopter.NewPropResult(true, "")
}

// String names the step in gopter's shrunk counterexample.
func (c *confStep[H]) String() string { return c.desc }

type confHarness[H any] struct {
	h H
	n int
}

// confModelProp builds a commands property: newHarness gives a fresh store
// with an empty model; pick draws one step from the generator's random
// source.
func confModelProp[H any](t suiteT, newHarness func() H, pick func(r *rand.Rand) *confStep[H]) gopter.Prop {
	return commands.Prop(&commands.ProtoCommands{
		NewSystemUnderTestFunc: func(commands.State) commands.SystemUnderTest {
			return &confHarness[H]{h: newHarness()}
		},
		// Each run's bundle is closed as the run ends (confScope): the
		// next run opens a fresh one, as before, and a store that
		// declares reopen serves it from the same process.
		DestroySystemUnderTestFunc: func(commands.SystemUnderTest) { confRelease(t) },
		InitialStateGen: func(*gopter.GenParameters) *gopter.GenResult {
			return gopter.NewGenResult(0, gopter.NoShrinker)
		},
		GenCommandFunc: func(commands.State) gopter.Gen {
			return func(p *gopter.GenParameters) *gopter.GenResult {
				var c commands.Command = pick(p.Rng)
				return gopter.NewGenResult(c, gopter.NoShrinker)
			}
		},
	})
}

// confOneOf picks one of xs.
func confOneOf[V any](r *rand.Rand, xs ...V) V { return xs[r.Intn(len(xs))] }

// confMismatch formats a store/model disagreement.
func confMismatch(what string, want, got any) string {
	return fmt.Sprintf("%s: model wants %s, store gave %s", what, confShowLoose(want), confShowLoose(got))
}

// confMismatchAt is confMismatch, followed, when the store answered
// (err nil), by where its answer got differs from the model's want
// (confDiff).
func confMismatchAt[V any](what string, want, got V, err error) string {
	if err != nil {
		return confMismatch(what, want, err)
	}
	return confMismatch(what, want, got) + confDiff(want, got)
}

// confShowLoose shows a value as JSON, an error as error(...), and a
// string as it is: the callers' strings are descriptions they formatted
// ("true {…}", "ErrNotFound"), which JSON quoting would bury in escapes.
func confShowLoose(v any) string {
	if err, ok := v.(error); ok && err != nil {
		return "error(" + err.Error() + ")"
	}
	s, ok := v.(string)
	if !ok {
		s = confShow(v)
	}
	if len(s) > 600 {
		s = s[:600] + "..."
	}
	return strings.TrimSpace(s)
}
