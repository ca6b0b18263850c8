package provision

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"
)

// The clock-jump fault moves the PostgreSQL server's own clock: Debian's
// libfaketime (package libfaketime, which ci/containers/setup-podman.sh
// installs on the machine) is bind-mounted into the container and
// preloaded into the server's processes; it reads the clock's offset from
// a file crashmatrix writes on the host (bind-mounted too), at most a
// second after it changed. Only the wall clock moves (now(),
// clock_timestamp()), not the monotonic one, as an NTP step or a VM's
// clock jump would. The library is preloaded by a `postgres` wrapper put
// first on the container's PATH, which the image's entrypoint execs as
// the postgres user once its setup as root is done: preloaded into the
// root entrypoint, libfaketime makes a semaphore only root may open, and
// the server it starts exits.
const (
	// faketimeDir is where Debian puts libfaketime on the machine.
	faketimeDir = "/usr/lib/x86_64-linux-gnu/faketime"
	// faketimeLib is the library preloaded (the single-threaded one:
	// PostgreSQL's processes are).
	faketimeLib = "libfaketime.so.1"
	// clockMount and faketimeMount are where the container sees them.
	clockMount    = "/crashmatrix-clock"
	faketimeMount = "/crashmatrix-faketime"
	// clockFile holds the offset ("+27000": seconds ahead).
	clockFile = "offset"
	// serverPath is the container's PATH: the wrapper's folder, then
	// where the official and the local images keep PostgreSQL's binaries
	// and the usual ones.
	serverPath = clockMount + "/bin:/usr/lib/postgresql/17/bin:/usr/lib/postgresql/16/bin:/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// wrapper is the `postgres` the entrypoint finds first.
	wrapper = `#!/bin/sh
# crashmatrix (clock-jump): the PostgreSQL server with libfaketime preloaded.
PATH=${PATH#` + clockMount + `/bin:}
export LD_PRELOAD=` + faketimeMount + "/" + faketimeLib + `
exec postgres "$@"
`
	// clockSettles bounds how long a new offset takes to show in now()
	// (libfaketime re-reads the file every second).
	clockSettles = 5 * time.Second
)

// serverClock is the offset file of one PostgreSQL container's clock.
type serverClock struct {
	dir string
	// why says why the clock cannot be moved ("" when it can).
	why string
}

// newServerClock prepares the offset file (at +0), or says why the
// server's clock cannot be moved.
func newServerClock() *serverClock {
	if _, err := os.Stat(filepath.Join(faketimeDir, faketimeLib)); err != nil {
		return &serverClock{why: fmt.Sprintf("the server's clock cannot be moved: libfaketime is not installed on this machine (%s: Debian package libfaketime; ci/containers/setup-podman.sh installs it)", filepath.Join(faketimeDir, faketimeLib))}
	}
	dir, err := os.MkdirTemp("", "crashmatrix-clock-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	c := &serverClock{dir: dir}
	if err == nil {
		err = c.write(0)
	}
	if err == nil {
		err = os.Mkdir(filepath.Join(dir, "bin"), 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "bin", "postgres"), []byte(wrapper), 0o755)
	}
	if err != nil {
		c.remove()
		return &serverClock{why: fmt.Sprintf("the server's clock cannot be moved: its offset file: %v", err)}
	}
	return c
}

// customizers preload libfaketime into the container's processes.
func (c *serverClock) customizers() []testcontainers.ContainerCustomizer {
	if c.why != "" {
		return nil
	}
	return []testcontainers.ContainerCustomizer{
		bind(faketimeDir, faketimeMount+":ro"), bind(c.dir, clockMount),
		testcontainers.WithEnv(map[string]string{
			"PATH":                         serverPath,
			"FAKETIME_TIMESTAMP_FILE":      clockMount + "/" + clockFile,
			"FAKETIME_CACHE_DURATION":      "1",
			"FAKETIME_DONT_FAKE_MONOTONIC": "1",
		}),
	}
}

// write sets the offset (whole seconds), replacing the file at once.
func (c *serverClock) write(offset time.Duration) error {
	s := strconv.FormatInt(int64(offset/time.Second), 10)
	if offset >= 0 {
		s = "+" + s
	}
	tmp := filepath.Join(c.dir, clockFile+".new")
	if err := os.WriteFile(tmp, []byte(s+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(c.dir, clockFile))
}

// setter is the Server.SetClock of the PostgreSQL container reached by
// dsn(): it writes the offset and returns once the server's now() shows
// it (a server whose processes did not load libfaketime never does).
func (c *serverClock) setter(dsn func(context.Context) (string, error)) func(context.Context, time.Duration) error {
	return func(ctx context.Context, offset time.Duration) error {
		if err := c.write(offset); err != nil {
			return fmt.Errorf("write the clock offset: %w", err)
		}
		var last time.Duration
		deadline := time.Now().Add(clockSettles)
		for {
			d, err := dsn(ctx)
			if err == nil {
				var srv time.Time
				if srv, err = pgClock(ctx, d); err == nil {
					last = time.Until(srv)
					if (last - offset).Abs() < time.Second+time.Second/2 {
						return nil
					}
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the server's clock is %s off the true time %s after it was set to %s (%v): does the image's C library load %s?", last.Round(time.Millisecond), clockSettles, offset, err, faketimeLib)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// remove deletes the offset file's folder.
func (c *serverClock) remove() {
	if c != nil && c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// pgClock is the PostgreSQL server's wall clock now.
func pgClock(ctx context.Context, dsn string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return time.Time{}, err
	}
	defer conn.Close(context.Background())
	var t time.Time
	err = conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t)
	return t, err
}
