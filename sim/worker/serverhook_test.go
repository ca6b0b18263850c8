package worker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
)

// A worker asks the supervisor's control server for a server fault over
// HTTP/1.1 written by hand (no net/http in a worker binary): the request
// reaches a net/http server as JSON, a 200 is the fault in place, and a
// refusal comes back with its status and message, short or chunked.
func TestServerFaultHookTalksToAnHTTPServer(t *testing.T) {
	var got ServerFaultRequest
	refuse, big := false, false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/case/k1" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request line or headers", http.StatusBadRequest)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch {
		case big:
			w.WriteHeader(http.StatusInternalServerError)
			w.(http.Flusher).Flush() // chunked from here
			_, _ = w.Write([]byte("restart failed: " + strings.Repeat("x", 5000)))
		case refuse:
			http.Error(w, "no such case run (it ended?)", http.StatusNotFound)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	hook := serverFaultHook(srv.URL+"/case/k1", "w2", 3)
	hit := faults.Hit{Point: "beforeCommit", Action: faults.Action{Kind: faults.ServerCrash, Server: "postgres", Hit: 1}}
	if err := hook(context.Background(), hit); err != nil {
		t.Fatalf("fault in place: %v, want nil", err)
	}
	if got.Worker != "w2" || got.Phase != 3 || got.Point != hit.Point || got.Action != hit.Action {
		t.Errorf("the supervisor got %+v, want worker w2, phase 3, %+v", got, hit)
	}
	refuse = true
	if err := hook(context.Background(), hit); err == nil || !strings.Contains(err.Error(), "404: no such case run") {
		t.Errorf("refused: %v, want the status and the message", err)
	}
	refuse, big = false, true
	if err := hook(context.Background(), hit); err == nil || !strings.Contains(err.Error(), "500: restart failed: xxx") || len(err.Error()) > 4300 {
		t.Errorf("refused, chunked: %.200v, want the status and the message's start", err)
	}
	// A supervisor that never answers: the context ends the wait.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done(): // the worker hung up
		case <-time.After(10 * time.Second):
		}
	}))
	defer hang.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := serverFaultHook(hang.URL+"/case/k1", "w2", 3)(ctx, hit); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Errorf("no answer: %v, want the context's deadline", err)
	}
	if _, _, err := postJSON(context.Background(), "https://127.0.0.1:1/x", nil, time.Second); err == nil {
		t.Error("an https URL: nil error, want one")
	}
}
