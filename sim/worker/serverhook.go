package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
)

// ServerRestartBudget bounds one server kill and restart: Neo4j recovers
// its transaction log in a fresh JVM, which on a busy machine takes tens
// of seconds.
const ServerRestartBudget = 5 * time.Minute

// EndpointControl is the CaseEnv.Servers key of the URL a worker asks for
// server faults at.
const EndpointControl = "control"

// ServerFaultRequest is what a worker sends the supervisor when a server
// fault fires at one of its windows.
type ServerFaultRequest struct {
	Worker string        `json:"worker"`
	Phase  int           `json:"phase"`
	Point  faults.Point  `json:"point"`
	Action faults.Action `json:"action"`
}

// serverFaultHook returns the faults.Runtime.Server hook of a worker whose
// case may fault servers: it asks the supervisor at url and waits for the
// fault to be in place (a restart can take seconds).
func serverFaultHook(url, worker string, phase int) func(context.Context, faults.Hit) error {
	// The supervisor answers once the fault is in place: a server restart
	// may take up to its budget.
	client := &http.Client{Timeout: ServerRestartBudget + time.Minute}
	return func(ctx context.Context, h faults.Hit) error {
		body, err := json.Marshal(ServerFaultRequest{Worker: worker, Phase: phase, Point: h.Point, Action: h.Action})
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("ask the supervisor for %s: %w", h.Action, err)
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("supervisor refused %s at %s: %s: %s", h.Action, h.Point, resp.Status, bytes.TrimSpace(msg))
		}
		return nil
	}
}
