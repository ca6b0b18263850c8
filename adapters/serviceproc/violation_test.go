package serviceproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/reference"
)

// The test binary is also a fake service: "fake <script>" answers hello
// with a declaration of every window, the harness's graph and events,
// then answers the first intent with the lines of the script (one per
// line of the argument, "\n"-separated), reading one answer after each
// callback line.
//
// "slow <marker> <script>" is the same fake, slow to start: it sleeps 6 s
// before it reads hello when the file marker does not exist yet (and
// creates it), or always when marker is "always".
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "fake" {
		fake(os.Args[2])
		os.Exit(0)
	}
	if len(os.Args) > 3 && os.Args[1] == "slow" {
		if _, err := os.Stat(os.Args[2]); err != nil {
			if os.Args[2] != "always" {
				_ = os.WriteFile(os.Args[2], nil, 0o644)
			}
			time.Sleep(6 * time.Second)
		}
		fake(os.Args[3])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func fake(script string) {
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadBytes('\n'); err != nil {
		return
	}
	d := Declared{Protocol: Protocol, Name: "fake", Systems: []string{SystemIngestion}, Windows: []string{"beforeGraphWrite"},
		HarnessStores: []string{"graph"}, Reports: []string{ReportEvents}, Clock: "harness"}
	b, _ := json.Marshal(map[string]any{"id": 0, "ok": d})
	fmt.Printf("%s\n", b)
	if _, err := in.ReadBytes('\n'); err != nil {
		return
	}
	for _, line := range strings.Split(script, "\n") {
		fmt.Println(line)
		if !strings.Contains(line, `"ok"`) && !strings.Contains(line, `"error"`) && !strings.Contains(line, `"event"`) {
			if _, err := in.ReadBytes('\n'); err != nil {
				return
			}
		}
	}
	time.Sleep(time.Minute) // silent after the script
}

// handler answers callbacks with fixed values.
type handler struct{ events int }

func (h *handler) Model(context.Context, ModelRequest) (reference.Extraction, error) {
	return reference.Extraction{Model: "m", Call: 1}, nil
}
func (h *handler) Now() int64                         { return 42 }
func (h *handler) Sleep(context.Context, int64) int64 { return 43 }
func (h *handler) Event(reference.Event)              { h.events++ }
func (h *handler) Store(context.Context, string, json.RawMessage) (any, error) {
	return map[string]any{}, nil
}
func (h *handler) Call(_ context.Context, _ string, _ json.RawMessage, run func() (json.RawMessage, error)) error {
	_, err := run()
	return err
}

// TestViolations: what the harness refuses of a service is a protocol
// error naming the problem (the case is undecided), and a conversation by
// the rules gets its result.
func TestViolations(t *testing.T) {
	for _, c := range []struct{ name, script, want string }{
		{"by the rules", `{"id":1,"now":{"step":1}}` + "\n" + `{"id":1,"event":{"kind":"stage","at":1}}` + "\n" + `{"id":1,"store":{"step":2,"op":"graph.apply","args":{}}}` + "\n" +
			`{"id":1,"ok":{"operationId":"o","outcome":"COMPLETED","revision":1}}`, ""},
		{"wrong step", `{"id":1,"now":{"step":2}}`, "now step 2, want 1"},
		{"wrong id", `{"id":7,"now":{"step":1}}`, "not the request in progress"},
		{"undeclared window", `{"id":1,"at":{"step":1,"point":"beforeCompleted"}}`, `crash window "beforeCompleted", which the service did not declare`},
		{"store of its own", `{"id":1,"store":{"step":1,"op":"ops.get","args":{}}}`, "no operation of a store the service declared in harnessStores"},
		{"calls not declared", `{"id":1,"call":{"step":1,"op":"ops.get","args":{}}}`, `did not declare reports: ["calls"]`},
		{"done without call", `{"id":1,"done":{"step":1,"op":"ops.get","ok":{}}}`, "a done without its call"},
		{"two parts", `{"id":1,"now":{"step":1},"sleep":{"step":1,"millis":1}}`, "exactly one of"},
		{"not json", `hello there`, "not a JSON object"},
		{"silence", `{"id":1,"now":{"step":1}}`, "no message within"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var seen *storeproc.ProtocolError
			s, err := Start(context.Background(), Options{Command: os.Args[0] + " fake '" + c.script + "'", Timeout: 500 * time.Millisecond,
				OnProtocolError: func(_ context.Context, e *storeproc.ProtocolError) { seen = e },
				Hello:           Hello{Role: RoleWorker, Dir: t.TempDir(), Namespace: "n", Space: "s", Holder: "h", LeaseTTLMillis: 1, ClaimTTLMillis: 1}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Kill()
			var res Result
			h := &handler{}
			err = s.Request(context.Background(), "ingest", map[string]any{"space": "s"}, h, &res)
			if c.want == "" {
				if err != nil || res.Outcome != "COMPLETED" || h.events != 1 {
					t.Fatalf("got %+v, %d events, %v", res, h.events, err)
				}
				return
			}
			if err == nil || !IsViolation(err) || !strings.Contains(err.Error(), c.want) || seen == nil {
				t.Fatalf("got %v (told: %v), want a protocol error saying %q", err, seen != nil, c.want)
			}
			if !s.Broken() {
				t.Error("the process was not killed after the violation")
			}
		})
	}
}

// TestRetryStart: a start that got no hello in time is tried once more
// with Options.RetryStart, told of the first attempt (not as a protocol
// error); a service that never answers hello is the protocol error
// (NoStart) after its second start, told once; without RetryStart the
// slow start is the error at once.
func TestRetryStart(t *testing.T) {
	script := `{"id":1,"ok":{"operationId":"o","outcome":"COMPLETED","revision":1}}`
	start := func(marker string, retry bool) (*Service, int, int, error) {
		var retries, told int
		o := Options{Command: os.Args[0] + " slow " + marker + " '" + script + "'", Timeout: 2 * time.Second, HelloTimeout: 2 * time.Second,
			OnProtocolError: func(context.Context, *storeproc.ProtocolError) { told++ },
			Hello:           Hello{Role: RoleRead, Dir: t.TempDir(), Namespace: "n", Space: "s", Holder: "h", LeaseTTLMillis: 1, ClaimTTLMillis: 1}}
		if retry {
			o.RetryStart = func(first *storeproc.ProtocolError) {
				if !first.NoStart {
					t.Errorf("retried after %v, not a start without hello", first)
				}
				retries++
			}
		}
		s, err := Start(context.Background(), o)
		return s, retries, told, err
	}
	s, retries, told, err := start(filepath.Join(t.TempDir(), "started"), true)
	if err != nil || retries != 1 || told != 0 {
		t.Fatalf("slow first start with RetryStart: %v, %d retries, %d protocol errors told; want a service after 1 retry, none told", err, retries, told)
	}
	var res Result
	if err := s.Request(context.Background(), "ingest", map[string]any{"space": "s"}, &handler{}, &res); err != nil || res.Outcome != "COMPLETED" {
		t.Errorf("the retried service's answer: %+v, %v", res, err)
	}
	s.Kill()
	var pe *storeproc.ProtocolError
	_, retries, told, err = start("always", true)
	if !errors.As(err, &pe) || !pe.NoStart || retries != 1 || told != 1 {
		t.Fatalf("a service that never answers hello: %v, %d retries, %d told; want NoStart after 1 retry, told once", err, retries, told)
	}
	_, retries, told, err = start(filepath.Join(t.TempDir(), "started"), false)
	if !errors.As(err, &pe) || !pe.NoStart || retries != 0 || told != 1 {
		t.Fatalf("a slow start without RetryStart: %v, %d told; want NoStart at once, told once", err, told)
	}
}
