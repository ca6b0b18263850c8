package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// storeStartCost is what one store process's start costs (bench-store's
// start-up samples): wall and CPU to its hello reply, and its first
// request after hello.
type storeStartCost struct {
	wall, cpu, first time.Duration
}

// storeRound is what bench-store saw of one store-cmd matrix round.
type storeRound struct {
	// opens is how many times a worker opened its store; spares how many
	// processes the supervisor started ahead of need, handed how many
	// times a worker took one, returned how many times a worker gave one
	// back.
	opens                    int
	spares, handed, returned int64
	// died is how many of the opens' store processes died with their
	// worker (killed, or not ended cleanly): never given back.
	died int
	// cpu is the round's CPU, goCPU the Go round's just before it; wall
	// the round's wall time.
	cpu, goCPU, wall time.Duration
	// self and goSelf are the supervisor's own share of cpu and goCPU.
	self, goSelf time.Duration
	starts       string // the report's store-starts line
}

// started is how many store processes the round started for its workers:
// the spares, and one per open that took none (the supervisor's pooled
// snapshot processes aside).
func (r storeRound) started() int { return max(r.opens-int(r.handed), 0) + int(r.spares) }

// storeProfile says where a store-cmd round's time went when the ratio
// target was not met: the store start-ups' share of its CPU (from the
// start-up cost measured before the rounds), the rest, and the first
// request's cost, on the round with the median CPU.
func storeProfile(rounds []storeRound, cost storeStartCost) string {
	if len(rounds) == 0 {
		return ""
	}
	r := rounds[len(rounds)/2]
	starts := time.Duration(r.started()) * cost.cpu
	rest := r.cpu - starts
	busy := r.cpu.Seconds() / (r.wall.Seconds() * float64(runtime.NumCPU()))
	return fmt.Sprintf("what stands in the way (profile of round %d): the store-cmd round took %s of CPU against %s for the Go round (%.2fx); %d store processes started (%d of them ahead of need; %d worker store opens took one ready; %d store processes died with their worker, which a crash needs, and the spares kept ready made up the other %d) at about %s of CPU each (the start-up above): about %s, %.0f%% of the round's CPU, spent whether or not a start waits on the critical path (the cores are shared with the cases); the rest, %s (%.2fx the Go round's CPU), is the calls on both sides of the pipe, the workers and the supervisor (the supervisor's own CPU %s against %s in the Go round; the workers' with their store processes %s against %s); its CPU filled %.0f%% of the %d cores over its wall time %s (the rest went to the machine's other load, or to waiting); a fresh store's first request after hello takes %s (a JVM runs it in its interpreter); %s",
		len(rounds)/2+1, r.cpu.Round(10*time.Millisecond), r.goCPU.Round(10*time.Millisecond), r.cpu.Seconds()/r.goCPU.Seconds(),
		r.started(), r.spares, r.handed, r.died, max(r.started()-r.died, 0), cost.cpu.Round(100*time.Microsecond), starts.Round(10*time.Millisecond), 100*starts.Seconds()/r.cpu.Seconds(),
		rest.Round(10*time.Millisecond), rest.Seconds()/r.goCPU.Seconds(), r.self.Round(10*time.Millisecond), r.goSelf.Round(10*time.Millisecond),
		(r.cpu - r.self).Round(10*time.Millisecond), (r.goCPU - r.goSelf).Round(10*time.Millisecond), 100*busy, runtime.NumCPU(), r.wall.Round(10*time.Millisecond), cost.first.Round(100*time.Microsecond), r.starts)
}

// certifySummaryRE picks the lines of certify's output that say where its
// time went and what it decided.
var certifySummaryRE = regexp.MustCompile(`CERTIFIED|conformance|cases in|store starts|exploration|explored|schedules`)

// benchCertify times `crashmatrix certify --store-cmd command` (the
// conformance suites, then the full matrix, as a team runs it) in the
// current directory against target, and prints its summary lines.
func benchCertify(ctx context.Context, out io.Writer, self, command, work string, target time.Duration) error {
	dir := filepath.Join(work, "certify")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	c := exec.CommandContext(ctx, self, "certify", "--quiet", "--store-cmd", command, "--workdir", dir)
	c.Stdout, c.Stderr = &buf, &buf
	cpu0 := cpuOf(syscall.RUSAGE_SELF) + cpuOf(syscall.RUSAGE_CHILDREN)
	t0 := time.Now()
	err := c.Run()
	took := time.Since(t0)
	cpu := cpuOf(syscall.RUSAGE_SELF) + cpuOf(syscall.RUSAGE_CHILDREN) - cpu0
	var lines []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if certifySummaryRE.MatchString(l) && len(lines) < 10 {
			lines = append(lines, "  certify: "+strings.TrimSpace(l))
		}
	}
	if err != nil {
		return fmt.Errorf("certify --store-cmd %q did not certify (%v): the figure would be meaningless\n%s", command, err, buf.String())
	}
	fmt.Fprintf(out, "%s\ncertify --store-cmd (the conformance suites, then the full matrix, as a team runs it): %s wall, CPU %s (target <= %s on a quiet machine: %s)\n",
		strings.Join(lines, "\n"), took.Round(100*time.Millisecond), cpu.Round(100*time.Millisecond), target, metOrNot(took <= target))
	return nil
}
