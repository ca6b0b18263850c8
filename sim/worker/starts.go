package worker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// A worker's starts file (WorkerSpec.StartsFile) holds one line as it
// begins opening its stores ("open <unix nanoseconds>") and one as it is
// done ("ready <unix nanoseconds>"): for a store-cmd store, from the start
// of its store processes to their hello replies. A background worker
// parked by a pause also notes when it stops ("pause <unix nanoseconds>")
// and goes on ("go <unix nanoseconds>"): it waits there for the next
// foreground worker, whose own store start and deadline that wait holds.

// NoteOpen notes in path that an open begins, and returns what notes that
// it ended (nothing when path is "").
func NoteOpen(path string) (ready func()) {
	if path == "" {
		return func() {}
	}
	appendStartLine(path, "open")
	return func() { appendStartLine(path, "ready") }
}

func appendStartLine(path, what string) {
	// Should it fail, the supervisor counts the start as work: the case
	// may end undecided, never judged wrongly.
	_ = writeStartLine(path, what)
}

func writeStartLine(path, what string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(what + " " + strconv.FormatInt(time.Now().UnixNano(), 10) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// spawnNotes is this worker process's starts file (RunWorker), where
// NoteSpawn notes the processes it starts.
var spawnNotes string

// NoteSpawn notes in this worker's starts file ("spawn <unix
// nanoseconds>") that it is about to start a process of its own (a
// store process: Backend.SpawnsNoted), before it does: a worker that
// noted none started none, and the supervisor need not look through
// /proc for what it left in its session when it ends. An error means
// the note was not written: the process must not be started.
func NoteSpawn() error {
	if spawnNotes == "" {
		return nil
	}
	if err := writeStartLine(spawnNotes, "spawn"); err != nil {
		return fmt.Errorf("noting a process start in %s: %w", spawnNotes, err)
	}
	return nil
}

// Spawned says whether the worker whose starts file is path may have
// started a process of its own: it has no file (""), noted one
// (NoteSpawn), or its file cannot be read. A worker that wrote nothing
// there has no file, and started none (NoteSpawn refuses a start it
// could not note).
func Spawned(path string) bool {
	if path == "" {
		return true
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return err != nil || bytes.HasPrefix(b, []byte("spawn ")) || bytes.Contains(b, []byte("\nspawn "))
}

// NotePause notes in path that the worker is parked by a pause, and
// returns what notes that it goes on (nothing when path is "").
func NotePause(path string) (goes func()) {
	if path == "" {
		return func() {}
	}
	appendStartLine(path, "pause")
	return func() { appendStartLine(path, "go") }
}

// startSpans reads a starts file: each open's begin and, once it ended,
// its duration (ended false for the last one when it is under way).
func startSpans(path string, each func(began int64, took time.Duration, ended bool)) {
	spans(path, "open", "ready", each)
}

// spans reads the spans of a starts file that begin with a line first
// and end with a line last.
func spans(path, first, last string, each func(began int64, took time.Duration, ended bool)) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var began int64
	open := false
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
		case first:
			began, open = ns, true
		case last:
			if open {
				each(began, time.Duration(ns-began), true)
			}
			open = false
		}
	}
	if open {
		each(began, 0, false)
	}
}

// NoteRetry notes in path that a service start got no hello in time and
// is tried once more (nothing when path is "").
func NoteRetry(path string) {
	if path != "" {
		appendStartLine(path, "retry")
	}
}

// StartRetries counts the retried starts path notes
// (WorkerResult.StartRetries).
func StartRetries(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(append([]byte("\n"), b...), []byte("\nretry "))
}

// StoreStarts lists how long each open of a worker's stores took, as its
// starts file says (WorkerResult.StoreStarts).
func StoreStarts(path string) []time.Duration {
	if path == "" {
		return nil
	}
	var out []time.Duration
	startSpans(path, func(_ int64, took time.Duration, ended bool) {
		if ended {
			out = append(out, took)
		}
	})
	return out
}

// StartTime is how long the worker whose starts file is path spent
// opening its stores by now, each open counted up to limit, and whether an
// open is still under way. Nothing without a file or a limit.
func StartTime(path string, limit time.Duration, now time.Time) (total time.Duration, open bool) {
	if path == "" || limit <= 0 {
		return 0, false
	}
	startSpans(path, func(began int64, took time.Duration, ended bool) {
		if !ended {
			took, open = max(now.Sub(time.Unix(0, began)), 0), true
		}
		total += min(took, limit)
	})
	return total, open
}

// PausedTime is how long the worker whose starts file is path has been
// parked by pauses by now, each pause counted up to limit, and whether it
// is parked now.
func PausedTime(path string, limit time.Duration, now time.Time) (total time.Duration, parked bool) {
	if path == "" || limit <= 0 {
		return 0, false
	}
	spans(path, "pause", "go", func(began int64, took time.Duration, ended bool) {
		if !ended {
			took, parked = max(now.Sub(time.Unix(0, began)), 0), true
		}
		total += min(took, limit)
	})
	return total, parked
}
