// Package procstat reads a process's line of /proc/PID/stat, the one place
// crashmatrix asks Linux about a process it did not start itself (a store
// process of a worker's group, the run that owns a container, the holder
// of a lazy mount).
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stat is what crashmatrix reads of /proc/PID/stat.
type Stat struct {
	PID   int
	Comm  string // the command name, parentheses and spaces included
	State byte   // R, S, D, Z, X, ...
	PPID  int
	PGRP  int
	// Session is the id of the process's session (field 6).
	Session int
	// Start is the process's start time in clock ticks since boot (field
	// 22): with the pid, it names a process across pid reuse.
	Start uint64
}

// Gone says whether the process has ended though its entry is still there
// (a zombie, or dead).
func (s Stat) Gone() bool { return s.State == 'Z' || s.State == 'X' }

// Parse reads the text of /proc/PID/stat: "pid (comm) state ppid pgrp ...".
// comm may hold spaces and parentheses, so the fields after it are counted
// from the last ')'.
func Parse(text string) (Stat, error) {
	i, j := strings.IndexByte(text, '('), strings.LastIndexByte(text, ')')
	if i < 0 || j < i {
		return Stat{}, fmt.Errorf("/proc stat %q: no (command)", clip(text))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(text[:i]))
	if err != nil {
		return Stat{}, fmt.Errorf("/proc stat %q: pid: %w", clip(text), err)
	}
	// After the command: state (field 3), ppid, pgrp, ... starttime (22).
	f := strings.Fields(text[j+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("/proc stat %q: %d fields after the command, want at least 20", clip(text), len(f))
	}
	s := Stat{PID: pid, Comm: text[i+1 : j], State: f[0][0]}
	if s.PPID, err = strconv.Atoi(f[1]); err != nil {
		return Stat{}, fmt.Errorf("/proc stat %q: ppid: %w", clip(text), err)
	}
	if s.PGRP, err = strconv.Atoi(f[2]); err != nil {
		return Stat{}, fmt.Errorf("/proc stat %q: pgrp: %w", clip(text), err)
	}
	if s.Session, err = strconv.Atoi(f[3]); err != nil {
		return Stat{}, fmt.Errorf("/proc stat %q: session: %w", clip(text), err)
	}
	if s.Start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("/proc stat %q: starttime: %w", clip(text), err)
	}
	return s, nil
}

// Read reads /proc/PID/stat. The error satisfies os.IsNotExist when there
// is no such process.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	return Parse(string(b))
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
