package faults

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The failpoints armed in this process: those of GO_FAILPOINTS, read at
// the first look, and those EnableFailpoint arms. The supervisor arms a
// worker's points through GO_FAILPOINTS (EnvValue) in the syntax of
// pingcap/failpoint, of which it uses one term only: path=return("action"),
// with ";" between points. This reader takes that term and no other, so
// that a worker links no HTTP server nor client for failpoints it never
// serves (a worker process's start is the matrix's unit of cost).
var armed struct {
	once  sync.Once
	mu    sync.RWMutex
	terms map[string]string // path -> the value its return(...) gives
	err   error             // GO_FAILPOINTS could not be read
}

// ParseFailpoints reads a GO_FAILPOINTS value: each point's path and the
// string its return("...") term gives. Anything but that term is an
// error that names it.
func ParseFailpoints(env string) (map[string]string, error) {
	terms := map[string]string{}
	for _, part := range strings.Split(env, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		path, term, ok := strings.Cut(part, "=")
		path = strings.TrimSpace(path)
		if !ok || path == "" {
			return nil, fmt.Errorf("GO_FAILPOINTS: %q: want path=return(\"action\")", part)
		}
		v, err := returnValue(term)
		if err != nil {
			return nil, fmt.Errorf("GO_FAILPOINTS: %s: %w", path, err)
		}
		terms[path] = v
	}
	return terms, nil
}

// returnValue is the string of a return("...") term (a Go-quoted string).
func returnValue(term string) (string, error) {
	t := strings.TrimSpace(term)
	inner, ok := strings.CutPrefix(t, "return(")
	if ok {
		inner, ok = strings.CutSuffix(inner, ")")
	}
	if !ok {
		return "", fmt.Errorf("term %q: crashmatrix arms a point with return(\"action\") only", t)
	}
	v, err := strconv.Unquote(strings.TrimSpace(inner))
	if err != nil {
		return "", fmt.Errorf("term %q: the value is not a quoted string: %w", t, err)
	}
	return v, nil
}

func loadArmed() {
	armed.once.Do(func() {
		armed.terms, armed.err = ParseFailpoints(os.Getenv("GO_FAILPOINTS"))
		if armed.terms == nil {
			armed.terms = map[string]string{}
		}
	})
}

// armedValue returns the value armed at path, if any. A GO_FAILPOINTS that
// cannot be read is a harness bug: it fails loudly at the first point.
func armedValue(path string) (string, bool) {
	loadArmed()
	if armed.err != nil {
		panic(armed.err.Error())
	}
	armed.mu.RLock()
	defer armed.mu.RUnlock()
	v, ok := armed.terms[path]
	return v, ok
}

// EnableFailpoint arms the point at path with term (return("action")) in
// this process, as GO_FAILPOINTS would.
func EnableFailpoint(path, term string) error {
	v, err := returnValue(term)
	if err != nil {
		return fmt.Errorf("failpoint %s: %w", path, err)
	}
	loadArmed()
	armed.mu.Lock()
	defer armed.mu.Unlock()
	armed.terms[path] = v
	return nil
}

// DisableFailpoint disarms the point at path in this process.
func DisableFailpoint(path string) {
	loadArmed()
	armed.mu.Lock()
	defer armed.mu.Unlock()
	delete(armed.terms, path)
}
