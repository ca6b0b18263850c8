package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// inittraceRE is one line of GODEBUG=inittrace=1: a package's
// initialisation, its wall-clock time and what it allocated.
var inittraceRE = regexp.MustCompile(`^init (\S+) @[0-9.]+ ms, ([0-9.]+) ms clock, ([0-9]+) bytes`)

// workerInitProfile starts the worker's bare start (command, made afresh
// for each run) n times with GODEBUG=inittrace=1 and says where its
// package initialisation goes: the median total, and the packages with
// the largest median times. "" when the runs print no trace.
func workerInitProfile(command func() *exec.Cmd, n int) string {
	per := map[string][]float64{}
	bytesOf := map[string]int{}
	var totals []float64
	for range n {
		c := command()
		c.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		var buf bytes.Buffer
		c.Stderr = &buf
		if err := c.Run(); err != nil {
			return ""
		}
		total := 0.0
		sc := bufio.NewScanner(&buf)
		for sc.Scan() {
			m := inittraceRE.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			ms, _ := strconv.ParseFloat(m[2], 64)
			b, _ := strconv.Atoi(m[3])
			per[m[1]] = append(per[m[1]], ms)
			bytesOf[m[1]] = b
			total += ms
		}
		totals = append(totals, total)
	}
	if len(per) == 0 {
		return ""
	}
	median := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	type pkg struct {
		name string
		ms   float64
	}
	var pkgs []pkg
	for name, v := range per {
		pkgs = append(pkgs, pkg{name, median(v)})
	}
	slices.SortFunc(pkgs, func(a, b pkg) int {
		if a.ms != b.ms {
			if a.ms > b.ms {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	var top []string
	for _, p := range pkgs[:min(4, len(pkgs))] {
		top = append(top, fmt.Sprintf("%s %s (%d bytes)", p.name, time.Duration(p.ms*float64(time.Millisecond)).Round(time.Microsecond), bytesOf[p.name]))
	}
	return fmt.Sprintf("the worker's package initialisation (GODEBUG=inittrace=1, %d starts): median %s of wall clock over %d packages, most in %s; the rest of a start is the runtime's own (an empty Go binary pays that too) and the binary's size to map",
		n, time.Duration(median(totals)*float64(time.Millisecond)).Round(time.Microsecond), len(pkgs), strings.Join(top, ", "))
}
