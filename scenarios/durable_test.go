package scenarios_test

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// A durable-step case has no scenario field yet: FromCase refuses it
// rather than write a file that replays the case without its kill.
func TestFromCaseRefusesADurableStepKill(t *testing.T) {
	c := catalogue.DurableStepCase(catalogue.DurableKill{Call: 8, Method: "ops.create", Step: 1, Steps: 2, Op: "fdatasync"})
	if _, err := scenarios.FromCase(c); err == nil || !strings.Contains(err.Error(), "ops.create after fdatasync 1 of 2") {
		t.Fatalf("FromCase of %s: %v, want an error naming the step", c.ID, err)
	}
}
