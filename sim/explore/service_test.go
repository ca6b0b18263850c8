package explore_test

import (
	"slices"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/explore"
)

// TestServiceSchedulesOnlyWhatItDeclares: for a service that declares a
// few windows, no harness store and no clock, the generator left to
// itself draws mostly schedules the service cannot run (left out, so
// that an exploration of N ran far fewer); shaped by ForService every
// schedule is one it can run, and the declared windows are all still
// drawn, with faults in most schedules.
func TestServiceSchedulesOnlyWhatItDeclares(t *testing.T) {
	windows := []faults.Point{faults.BeforeGraphWrite, faults.BeforeStateCommit, faults.RecoveryBeforeResume}
	svc := &sim.ServiceSpec{Command: "unused", Declared: serviceproc.Declared{Name: "few-windows", Systems: []string{serviceproc.SystemIngestion},
		Reports: []string{serviceproc.ReportEvents}}}
	for _, w := range windows {
		svc.Declared.Windows = append(svc.Declared.Windows, string(w))
	}
	shape := explore.DefaultShape
	shape.RandomKill, shape.KillCalls, shape.KillCommits = 0.3, 20, 5
	const n = 400
	count := func(s explore.Shape) (left, armed int, drawn map[faults.Point]bool) {
		drawn = map[faults.Point]bool{}
		for i := 0; i < n; i++ {
			c := explore.Schedule(7, i, s)
			if ok, _ := svc.Applicable(c); !ok {
				left++
				continue
			}
			any := false
			for _, st := range c.Steps {
				for p := range st.Arms {
					drawn[p], any = true, true
				}
			}
			if any {
				armed++
			}
		}
		return left, armed, drawn
	}
	plain := shape
	plain.PlanSave = 0
	before, _, _ := count(plain)
	if before < n/2 {
		t.Errorf("the generator without the service's declarations: %d of %d schedules left out; want most (else this test shows nothing)", before, n)
	}
	shaped := explore.ForService(shape, svc)
	after, armed, drawn := count(shaped)
	t.Logf("left out of %d schedules: %d unshaped, %d shaped; shaped with a fault armed: %d", n, before, after, armed)
	if after != 0 {
		t.Errorf("shaped by ForService: %d of %d schedules left out; want none", after, n)
	}
	for _, w := range windows {
		if !drawn[w] {
			t.Errorf("declared window %s never drawn in %d schedules", w, n)
		}
	}
	if armed < n/2 {
		t.Errorf("%d of %d shaped schedules arm a fault; want most", armed, n)
	}
	// Without a service the shape is the same: the schedules of a seed
	// do not change.
	if s := explore.ForService(shape, nil); s.CanArm != nil || !slices.Equal(explore.Schedule(7, 3, s).Steps[0].Actions, explore.Schedule(7, 3, shape).Steps[0].Actions) {
		t.Errorf("ForService without a service changed the shape")
	}
}
