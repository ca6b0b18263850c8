package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"strconv"
	"strings"
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
	return func(ctx context.Context, h faults.Hit) error {
		body, err := json.Marshal(ServerFaultRequest{Worker: worker, Phase: phase, Point: h.Point, Action: h.Action})
		if err != nil {
			return err
		}
		// The supervisor answers once the fault is in place: a server
		// restart may take up to its budget.
		status, msg, err := postJSON(ctx, url, body, ServerRestartBudget+time.Minute)
		if err != nil {
			return fmt.Errorf("ask the supervisor for %s: %w", h.Action, err)
		}
		if status != 200 {
			return fmt.Errorf("supervisor refused %s at %s: %d: %s", h.Action, h.Point, status, bytes.TrimSpace(msg))
		}
		return nil
	}
}

// postJSON posts body to the supervisor's control URL (http://host:port/path)
// and returns the reply's status code and the start of its body (4 KiB at
// most). HTTP/1.1 by hand, one request per connection: net/http (with
// crypto/tls and its packages' initialisation) would be linked into every
// worker binary, and a worker process's start is the matrix's unit of
// cost.
func postJSON(ctx context.Context, rawURL string, body []byte, timeout time.Duration) (int, []byte, error) {
	u, err := neturl.Parse(rawURL)
	if err != nil {
		return 0, nil, err
	}
	if u.Scheme != "http" || u.Host == "" {
		return 0, nil, fmt.Errorf("control URL %q: want http://host:port/path", rawURL)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", u.RequestURI(), u.Host, len(body))
	if _, err := conn.Write(append([]byte(req), body...)); err != nil {
		return 0, nil, ctxErr(ctx, err)
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, nil, ctxErr(ctx, err)
	}
	// "HTTP/1.1 200 OK"
	f := strings.Fields(line)
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/1.") {
		return 0, nil, fmt.Errorf("the supervisor's reply %q is no HTTP/1 status line", strings.TrimSpace(line))
	}
	status, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, nil, fmt.Errorf("the supervisor's reply %q: status: %w", strings.TrimSpace(line), err)
	}
	chunked := false
	for {
		h, err := r.ReadString('\n')
		if err != nil {
			return 0, nil, ctxErr(ctx, err)
		}
		if strings.TrimSpace(h) == "" {
			break
		}
		name, value, _ := strings.Cut(h, ":")
		if strings.EqualFold(strings.TrimSpace(name), "Transfer-Encoding") && strings.Contains(strings.ToLower(value), "chunked") {
			chunked = true
		}
	}
	if chunked {
		// The first chunk is enough for a message.
		size, err := r.ReadString('\n')
		if err != nil {
			return status, nil, nil
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(strings.Split(size, ";")[0]), 16, 64)
		msg, _ := io.ReadAll(io.LimitReader(r, min(n, 4096)))
		return status, msg, nil
	}
	msg, _ := io.ReadAll(io.LimitReader(r, 4096))
	return status, msg, nil
}

// ctxErr is the context's error when it ended the exchange, else err.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}
