package sim

import (
	"strings"
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestProgressLogPrintsEachTenthAndEveryTenSeconds(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	var lines []string
	p := newProgressLog(func(l string) { lines = append(lines, l) }, "certify", "cases", 40, 0, clock.now)
	// 40 cases: a line at each 4th case (each tenth), none in between.
	for i := 1; i <= 8; i++ {
		clock.t = clock.t.Add(time.Second)
		p.Done(i == 3)
	}
	want := []string{
		"certify: 4/40 cases (10%), 1 failed, 4s elapsed",
		"certify: 8/40 cases (20%), 1 failed, 8s elapsed",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after 8 of 40 cases the log printed:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// Nothing done for a while: a line once 10 s have passed since the
	// last one, not before.
	clock.t = clock.t.Add(9 * time.Second)
	p.check()
	if len(lines) != 2 {
		t.Fatalf("a line 9s after the last: %q", lines[2:])
	}
	clock.t = clock.t.Add(time.Second)
	p.check()
	if len(lines) != 3 || lines[2] != "certify: 8/40 cases (20%), 1 failed, 18s elapsed" {
		t.Fatalf("10s after the last line: %q", lines[2:])
	}
	// The rest of the run: the tenths up to 100%, then nothing after Stop.
	for i := 9; i <= 40; i++ {
		p.Done(false)
	}
	if len(lines) != 11 || lines[10] != "certify: 40/40 cases (100%), 1 failed, 18s elapsed" {
		t.Fatalf("at the end of the run: %d lines, the last %q", len(lines), lines[len(lines)-1])
	}
	p.Stop()
	clock.t = clock.t.Add(time.Minute)
	p.check()
	if len(lines) != 11 {
		t.Fatalf("a line after Stop: %q", lines[11:])
	}
}

func TestProgressLogOfAFewCasesPrintsEachAndOfUnknownSizeByTime(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	var lines []string
	p := newProgressLog(func(l string) { lines = append(lines, l) }, "run", "scenarios", 3, 0, clock.now)
	for range 3 {
		p.Done(false)
	}
	if len(lines) != 3 || lines[0] != "run: 1/3 scenarios (33%), 0 failed, 0s elapsed" {
		t.Fatalf("3 scenarios: %q", lines)
	}
	// explore under a 20 s budget: a line every 2 s (a tenth of it).
	lines = nil
	p = newProgressLog(func(l string) { lines = append(lines, l) }, "explore", "schedules", 0, 20*time.Second, clock.now)
	for i := range 5 {
		p.Done(i == 1)
		clock.t = clock.t.Add(time.Second)
		p.check()
	}
	if strings.Join(lines, "|") != "explore: 2 schedules, 1 failed, 2s elapsed|explore: 4 schedules, 1 failed, 4s elapsed" {
		t.Fatalf("explore, 5 s of a 20 s budget: %q", lines)
	}
}

func TestProgressLogTicks(t *testing.T) {
	got := make(chan string, 10)
	p := newProgressLog(func(l string) { got <- l }, "certify", "cases", 100, 0, time.Now)
	p.every = 50 * time.Millisecond
	go p.tick(10 * time.Millisecond)
	defer p.Stop()
	select {
	case l := <-got:
		if l != "certify: 0/100 cases (0%), 0 failed, 0s elapsed" {
			t.Fatalf("the ticker's line: %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no line from the ticker of a silent run")
	}
}
