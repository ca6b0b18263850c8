package lazyfs

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// load reads dir into the model as its durable (and live) state: files,
// directories, symbolic links, FIFOs and sockets, with the names of a
// file that has several (hard links) leading to one node.
func load(m *model, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	inodes := map[uint64]*node{} // the files with several names, by inode
	var walk func(n *node, path string) error
	walk = func(n *node, path string) error {
		ents, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := filepath.Join(path, e.Name())
			info, err := e.Info()
			if err != nil {
				return err
			}
			st, _ := info.Sys().(*syscall.Stat_t)
			var c *node
			switch t := info.Mode().Type(); {
			case info.IsDir():
				c = m.newNode(true, uint32(info.Mode().Perm()), 0, 0)
				if err := walk(c, p); err != nil {
					return err
				}
			case st != nil && st.Nlink > 1 && inodes[st.Ino] != nil:
				c = inodes[st.Ino]
			case info.Mode().IsRegular():
				c = m.newNode(false, uint32(info.Mode().Perm()), 0, 0)
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				c.write(b, 0)
				c.dur = c.live.clone()
			case t == os.ModeSymlink:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				c = m.newSpecial(syscall.S_IFLNK, target, 0o777, 0, 0)
			case t == os.ModeNamedPipe:
				c = m.newSpecial(syscall.S_IFIFO, "", uint32(info.Mode().Perm()), 0, 0)
			case t == os.ModeSocket:
				c = m.newSpecial(syscall.S_IFSOCK, "", uint32(info.Mode().Perm()), 0, 0)
			default:
				return fmt.Errorf("%s: a %s, and lazyfs holds no device nodes", p, info.Mode().Type())
			}
			if st != nil && st.Nlink > 1 && !c.dir {
				inodes[st.Ino] = c
			}
			c.nlink++
			c.mtime = info.ModTime()
			n.kids[e.Name()], n.durKids[e.Name()] = c, c
		}
		return nil
	}
	return walk(m.root, dir)
}

// store writes the model's durable state into dir, in place of what dir
// held; a file with several durable names gets them as hard links.
func store(m *model, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	written := map[*node]string{}
	var walk func(n *node, path string) error
	walk = func(n *node, path string) error {
		for name, c := range n.durKids {
			p := filepath.Join(path, name)
			if first, ok := written[c]; ok {
				if err := os.Link(first, p); err != nil {
					return err
				}
				continue
			}
			written[c] = p
			switch c.kind {
			case syscall.S_IFLNK:
				if err := os.Symlink(c.target, p); err != nil {
					return err
				}
				continue
			case syscall.S_IFIFO, syscall.S_IFSOCK:
				if err := syscall.Mknod(p, c.kind|c.mode, 0); err != nil {
					return &os.PathError{Op: "mknod", Path: p, Err: err}
				}
				continue
			}
			if c.dir {
				if err := os.Mkdir(p, os.FileMode(c.mode)|0o700); err != nil {
					return err
				}
				if err := walk(c, p); err != nil {
					return err
				}
				continue
			}
			b := make([]byte, c.dur.size)
			saved := c.live
			c.live = c.dur
			c.read(b, 0)
			c.live = saved
			if err := os.WriteFile(p, b, os.FileMode(c.mode)|0o600); err != nil {
				return err
			}
			_ = os.Chtimes(p, time.Time{}, c.mtime)
		}
		return nil
	}
	return walk(m.root, dir)
}
