package provision

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
)

// lazyData are the lazy mounts (faults/lazyfs) that hold the servers'
// data directories when the run may cut their power: one mount per
// server, served by this process, bind-mounted into the container.
type lazyData struct {
	base   string
	mounts map[string]*lazyfs.FS
}

// newLazyData makes the folder the mounts go under, with its owner (see
// reap.go, whose reapDead, run before any container starts, cleans what a
// run killed by SIGKILL left behind).
func newLazyData() (*lazyData, error) {
	base, err := os.MkdirTemp("", "crashmatrix-serverdata-")
	if err != nil {
		return nil, err
	}
	// Its owner, for the run that finds it after this one was killed
	// (reapServerData).
	if err := os.WriteFile(filepath.Join(base, ownerFile), []byte(owner()+"\n"), 0o644); err != nil {
		os.RemoveAll(base)
		return nil, err
	}
	return &lazyData{base: base, mounts: map[string]*lazyfs.FS{}}, nil
}

// mount mounts the lazy file system of server and returns the directory
// to bind into its container: "data" on the mount, created and synced
// (with the mount's root) so that it survives every power loss, as a
// database's directory does. Everyone may use it (allow_other): the
// server runs as its own user; its entrypoint chowns and chmods it (the
// model keeps owner and mode). journaled gives the mount ext4's and
// XFS's journaled names (lazyfs.Options.JournaledNames) in place of the
// POSIX rule: Neo4j fsyncs files, never directories.
func (l *lazyData) mount(server string, journaled bool) (string, error) {
	mnt := filepath.Join(l.base, server)
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return "", err
	}
	fs, err := lazyfs.Mount(mnt, lazyfs.Options{AllowOther: true, JournaledNames: journaled})
	if err != nil {
		return "", err
	}
	l.mounts[server] = fs
	data := filepath.Join(mnt, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		return "", err
	}
	root, err := os.Open(mnt)
	if err != nil {
		return "", err
	}
	defer root.Close()
	if err := root.Sync(); err != nil {
		return "", fmt.Errorf("sync %s: %w", mnt, err)
	}
	return data, nil
}

// settled makes what server wrote to its mount so far durable (FS.SyncAll):
// called once the server answers, so that a power loss drops what the
// run wrote and did not sync, not the image's set-up (its entrypoint
// appends to postgresql.conf and pg_hba.conf without an fsync, as a
// machine's writeback would have written them out long before).
func (l *lazyData) settled(server string) {
	if l != nil && l.mounts[server] != nil {
		l.mounts[server].SyncAll()
	}
}

// powerLoss is the server's Server.PowerLoss.
func (l *lazyData) powerLoss(server string) func(lazyfs.Tear) lazyfs.Loss {
	return l.mounts[server].Cut
}

// close unmounts every mount (the containers are gone: a mount still
// busy is detached) and removes the folder.
func (l *lazyData) close() error {
	if l == nil {
		return nil
	}
	var errs []error
	for name, fs := range l.mounts {
		if err := fs.Unmount(); err != nil {
			errs = append(errs, fmt.Errorf("%s data: %w", name, err))
		}
	}
	l.mounts = map[string]*lazyfs.FS{}
	if err := os.RemoveAll(l.base); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// bind mounts host dir at target in the container.
func bind(dir, target string) testcontainers.ContainerCustomizer {
	return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
		hc.Binds = append(hc.Binds, dir+":"+target)
	})
}

// postgresDataDir is where a PostgreSQL image keeps its data (PGDATA of
// the official image and of the local build alike).
const postgresDataDir = "/var/lib/postgresql/data"

// neo4jDataDir is where a Neo4j image keeps its databases and
// transaction logs: the local image under NEO4J_HOME, the official one
// under /data.
func neo4jDataDir(image string) string {
	if strings.HasPrefix(image, "localhost/crashmatrix/") {
		return "/var/lib/neo4j/data"
	}
	return "/data"
}
