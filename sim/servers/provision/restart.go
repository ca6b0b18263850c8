package provision

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/sim/servers/serverfaults"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// containerServer is a started container as a server the supervisor may
// kill (SIGKILL to the container, which ends every process in it) and
// start again: the container keeps its writable layer, so the server
// comes back on its data. ping answers once the server at addr answers a
// query.
func containerServer(ctx context.Context, name, protocol, port string, c testcontainers.Container, ping func(ctx context.Context, addr string) error) (*serverfaults.Server, error) {
	addr, err := mappedAddr(ctx, c, port)
	if err != nil {
		return nil, err
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("container engine client for %s: %w", name, err)
	}
	id := c.GetContainerID()
	return &serverfaults.Server{
		Name: name, Protocol: protocol, Addr: addr,
		Log: func(ctx context.Context, n int) string { return logTail(ctx, c, n) },
		Kill: func(ctx context.Context) error {
			if _, err := cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
				// Dying already: a durable-step kill SIGKILLs the server's
				// process first (sim/casefaults/serverdurable.go), and a server whose
				// main process that was (Neo4j's JVM) takes its container
				// down with it; wait for it to be down, as for a kill.
				if werr := untilStopped(ctx, c, stoppedWithin); werr != nil {
					return fmt.Errorf("SIGKILL container %.12s: %w (%v)", id, err, werr)
				}
			}
			w := cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
			select {
			case <-w.Result:
				return nil
			case err := <-w.Error:
				return fmt.Errorf("wait for container %.12s to die: %w", id, err)
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		// server-pause freezes the container's cgroup: every process in it
		// stops at once, as SIGSTOP to each would stop it, and goes on
		// where it was on unpause.
		Pause: func(ctx context.Context) error {
			if _, err := cli.ContainerPause(ctx, id, client.ContainerPauseOptions{}); err != nil {
				return fmt.Errorf("pause (freeze) container %.12s: %w", id, err)
			}
			return nil
		},
		Resume: func(ctx context.Context) error {
			if _, err := cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{}); err != nil {
				return fmt.Errorf("unpause container %.12s: %w", id, err)
			}
			return nil
		},
		Start: func(ctx context.Context) (string, error) {
			if _, err := cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
				return "", fmt.Errorf("start container %.12s again: %w", id, err)
			}
			var addr string
			// A server that cannot start on its data (after a power loss,
			// say) exits: say so with its last log lines at once, rather
			// than after the whole budget.
			var exited error
			err := firstQueryWithin(ctx, serverfaults.RestartBudget, func(ctx context.Context) error {
				if st, err := c.State(ctx); err == nil && !st.Running && st.Status == "exited" {
					exited = fmt.Errorf("%s exited (code %d) instead of starting again on its data; its last log lines:\n%s", name, st.ExitCode, logTail(ctx, c, 12))
					return nil
				}
				var err error
				if addr, err = mappedAddr(ctx, c, port); err != nil {
					return err
				}
				return ping(ctx, addr)
			})
			if exited != nil {
				return "", exited
			}
			if err != nil {
				return "", fmt.Errorf("%s does not answer after its restart: %w", name, err)
			}
			return addr, nil
		},
	}, nil
}

// stoppedWithin is how long a container whose main process died may take
// to be seen stopped.
const stoppedWithin = 30 * time.Second

// untilStopped waits until the container's engine no longer says it runs.
// Podman, told to kill a container whose main process has just died (the
// JVM a durable-step kill SIGKILLed inside its sync), answers "container
// state improper: stopped" while it notes the exit, and its inspect can
// still fail or say running for a moment: asking once took a dying
// container for a live one, the kill failed, and nothing started Neo4j
// again (2 of 4 runs, 2026-12-05; TestNeo4jKilledAfterItsDurableStep).
func untilStopped(ctx context.Context, c testcontainers.Container, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		st, err := c.State(ctx)
		if err == nil && !st.Running {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("after %s its state cannot be read: %w", within, err)
			}
			return fmt.Errorf("after %s it still runs (status %s)", within, st.Status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// mappedAddr is where the host reaches a container's port now.
func mappedAddr(ctx context.Context, c testcontainers.Container, port string) (string, error) {
	host, err := c.Host(ctx)
	if err != nil {
		return "", err
	}
	p, err := c.MappedPort(ctx, port)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, p.Port()), nil
}

// ParseServerConfig parses --postgres-config values (key=value each) into
// the server's -c arguments; a bad entry is named.
func ParseServerConfig(kvs []string) ([]string, error) {
	var args []string
	keys := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\n'\"") {
			return nil, fmt.Errorf("--postgres-config %q: want key=value (a PostgreSQL setting, e.g. synchronous_commit=off)", kv)
		}
		keys[k] = v
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		args = append(args, "-c", k+"="+keys[k])
	}
	return args, nil
}

// logTail is the last n lines of a container's log (without Java stack
// frames).
func logTail(ctx context.Context, c testcontainers.Container, n int) string {
	r, err := c.Logs(ctx)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer r.Close()
	b, _ := io.ReadAll(io.LimitReader(r, 8<<20))
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "at ") && !strings.HasPrefix(t, "... ") {
			lines = append(lines, "  "+t)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
