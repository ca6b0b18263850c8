package lazyfs

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// load reads dir into the model as its durable (and live) state.
func load(m *model, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
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
			var c *node
			switch {
			case info.IsDir():
				c = m.newNode(true, uint32(info.Mode().Perm()), 0, 0)
				if err := walk(c, p); err != nil {
					return err
				}
			case info.Mode().IsRegular():
				c = m.newNode(false, uint32(info.Mode().Perm()), 0, 0)
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				c.write(b, 0)
				c.dur = c.live.clone()
			default:
				return fmt.Errorf("%s: a %s, and lazyfs holds only files and directories", p, info.Mode().Type())
			}
			c.mtime = info.ModTime()
			n.kids[e.Name()], n.durKids[e.Name()] = c, c
		}
		return nil
	}
	return walk(m.root, dir)
}

// store writes the model's durable state into dir, in place of what dir
// held.
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
	var walk func(n *node, path string) error
	walk = func(n *node, path string) error {
		for name, c := range n.durKids {
			p := filepath.Join(path, name)
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
