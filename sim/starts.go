package sim

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"time"
)

// A worker's starts file (WorkerSpec.StartsFile) holds one line as it
// begins opening its stores ("open <unix nanoseconds>") and one as it is
// done ("ready <unix nanoseconds>"): for a store-cmd store, from the start
// of its store processes to their hello replies.

// noteOpen notes in path that an open begins, and returns what notes that
// it ended (nothing when path is "").
func noteOpen(path string) (ready func()) {
	if path == "" {
		return func() {}
	}
	appendStartLine(path, "open")
	return func() { appendStartLine(path, "ready") }
}

func appendStartLine(path, what string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		// Then the supervisor counts the start as work: the case may end
		// undecided, never judged wrongly.
		return
	}
	defer f.Close()
	_, _ = f.WriteString(what + " " + strconv.FormatInt(time.Now().UnixNano(), 10) + "\n")
}

// startTime is how long the worker whose starts file is path spent
// opening its stores by now, each open counted up to limit, and whether an
// open is still under way. Nothing without a file or a limit.
func startTime(path string, limit time.Duration, now time.Time) (total time.Duration, open bool) {
	if path == "" || limit <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	var began int64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		what, at, ok := bytes.Cut(sc.Bytes(), []byte(" "))
		if !ok {
			continue // a line being written
		}
		ns, err := strconv.ParseInt(string(at), 10, 64)
		if err != nil {
			continue
		}
		switch string(what) {
		case "open":
			began, open = ns, true
		case "ready":
			if open {
				total += min(time.Duration(ns-began), limit)
			}
			open = false
		}
	}
	if open {
		total += min(max(now.Sub(time.Unix(0, began)), 0), limit)
	}
	return total, open
}
