package properties

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/explorerun"
)

// CrashOptions.Explore: zero is the default count on the whole matrix and
// none on a part of it, a negative value is off, a positive one is used.
func TestExploreCountFromOptions(t *testing.T) {
	point := []faults.Point{faults.BeforeCompleted}
	for _, c := range []struct {
		name string
		opts []CrashOptions
		want int
	}{
		{"no options", nil, explorerun.DefaultCount},
		{"zero, whole matrix", []CrashOptions{{Parallel: 2}}, explorerun.DefaultCount},
		{"zero, a part", []CrashOptions{{Points: point}}, 0},
		{"negative", []CrashOptions{{Explore: -1}}, 0},
		{"given, a part", []CrashOptions{{Points: point, Explore: 30}}, 30},
	} {
		o, _, err := crashOptions(c.opts)
		if err != nil || o.Explore != c.want {
			t.Errorf("%s: Explore %d (%v), want %d", c.name, o.Explore, err, c.want)
		}
	}
}
