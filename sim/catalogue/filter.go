package catalogue

import (
	"github.com/crashmatrix/crashmatrix/faults"
)

// Filter selects cases by window points, kinds and classes (empty = all).
func Filter(cases []Case, points []faults.Point, kinds []faults.Kind, classes []string) []Case {
	in := func(n int, f func(int) bool) bool {
		if n == 0 {
			return true
		}
		for i := 0; i < n; i++ {
			if f(i) {
				return true
			}
		}
		return false
	}
	var out []Case
	for _, c := range cases {
		if c.Class != "" {
			if len(points) > 0 || len(kinds) > 0 {
				if len(classes) == 0 {
					continue
				}
			}
			if !in(len(classes), func(i int) bool { return classes[i] == c.Class }) {
				continue
			}
			out = append(out, c)
			continue
		}
		if len(classes) > 0 && len(points) == 0 && len(kinds) == 0 {
			continue
		}
		if in(len(points), func(i int) bool { return points[i] == c.Point }) && in(len(kinds), func(i int) bool { return kinds[i] == c.Kind }) {
			out = append(out, c)
		}
	}
	return out
}
