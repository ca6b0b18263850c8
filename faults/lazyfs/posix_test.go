package lazyfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// Without a power loss the lazy mount must behave as a disk does: a store
// that works on tmpfs works on it, or the power-loss column would fail
// correct stores. The same script of ordinary file operations runs on
// tmpfs (or the test's temporary folder) and on a lazy mount, and every
// observable result must agree: contents, sizes, link counts, listings,
// and the error of each operation that fails.
func TestBehavesAsADiskWithoutAPowerLoss(t *testing.T) {
	f := mount(t)
	ref := t.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "lazyfs-ref-"); err == nil {
			ref = d
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	want, got := posixScript(ref), posixScript(f.Dir())
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Errorf("step %d: on a lazy mount %q, on a disk %q", i, at(got, i), want[i])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d steps on a lazy mount, %d on a disk", len(got), len(want))
	}
}

func at(xs []string, i int) string {
	if i < len(xs) {
		return xs[i]
	}
	return "<none>"
}

// posixScript runs the operations in dir and returns what each showed.
func posixScript(dir string) []string {
	p := func(names ...string) string { return filepath.Join(append([]string{dir}, names...)...) }
	var out []string
	show := func(what string, v any, err error) {
		var errno syscall.Errno
		switch {
		case errors.As(err, &errno):
			out = append(out, fmt.Sprintf("%s: %s", what, errno.Error()))
		case err != nil:
			out = append(out, fmt.Sprintf("%s: %v", what, err))
		default:
			out = append(out, fmt.Sprintf("%s: %v", what, v))
		}
	}
	showOf := func(what string) func(any, error) { return func(v any, err error) { show(what, v, err) } }
	write := func(path string, flags int, data string, off int64) error {
		h, err := os.OpenFile(path, flags, 0o644)
		if err != nil {
			return err
		}
		defer h.Close()
		if off >= 0 {
			_, err = h.WriteAt([]byte(data), off)
		} else {
			_, err = h.WriteString(data)
		}
		return err
	}
	read := func(path string) (string, error) { b, err := os.ReadFile(path); return string(b), err }
	lstat := func(path string) (string, error) {
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			return "", err
		}
		return fmt.Sprintf("type %o mode %o nlink %d", st.Mode&syscall.S_IFMT, st.Mode&0o7777, st.Nlink), nil
	}
	size := func(path string) (int64, error) {
		st, err := os.Stat(path)
		if err != nil {
			return 0, err
		}
		return st.Size(), nil
	}
	list := func() (string, error) {
		ents, err := os.ReadDir(dir)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		slices.Sort(names)
		return strings.Join(names, ","), err
	}
	show("create", nil, write(p("a"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, "hello", -1))
	show("append", nil, write(p("a"), os.O_WRONLY|os.O_APPEND, " world", -1))
	showOf("read")(read(p("a")))
	show("write past the end", nil, write(p("a"), os.O_WRONLY, "X", 20))
	show("read with a hole", fmt.Sprintf("%q", must(read(p("a")))), nil)
	showOf("size")(size(p("a")))
	show("truncate", nil, os.Truncate(p("a"), 3))
	show("grow", nil, os.Truncate(p("a"), 10))
	show("read grown", fmt.Sprintf("%q", must(read(p("a")))), nil)
	_, err := os.OpenFile(p("a"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	show("exclusive create of an existing name", nil, err)
	show("mkdir", nil, os.Mkdir(p("dir"), 0o755))
	show("mkdir again", nil, os.Mkdir(p("dir"), 0o755))
	show("file in dir", nil, write(p("dir", "f"), os.O_CREATE|os.O_WRONLY, "1", -1))
	show("rmdir of a full directory", nil, os.Remove(p("dir")))
	show("rename a file over a directory", nil, os.Rename(p("a"), p("dir")))
	show("rename a directory over a file", nil, os.Rename(p("dir"), p("a")))
	show("rename a directory into itself", nil, os.Rename(p("dir"), p("dir", "sub")))
	show("unlink of a directory", nil, syscall.Unlink(p("dir")))
	show("rmdir of a file", nil, syscall.Rmdir(p("a")))
	show("hard link", nil, os.Link(p("a"), p("b")))
	showOf("linked")(lstat(p("b")))
	show("hard link onto an existing name", nil, os.Link(p("a"), p("b")))
	show("hard link of a directory", nil, os.Link(p("dir"), p("dirlink")))
	show("symlink", nil, os.Symlink("a", p("s")))
	showOf("symlink's own")(lstat(p("s")))
	showOf("read through the symlink")(read(p("s")))
	showOf("readlink")(os.Readlink(p("s")))
	_, err = os.Readlink(p("a"))
	show("readlink of a file", nil, err)
	show("dangling symlink", nil, os.Symlink("nowhere", p("dangling")))
	_, err = read(p("dangling"))
	show("read through a dangling symlink", nil, err)
	_, err = os.OpenFile(p("s"), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	show("O_NOFOLLOW on a symlink", nil, err)
	show("chmod", nil, os.Chmod(p("a"), 0o600))
	showOf("mode")(lstat(p("a")))
	h, err := os.OpenFile(p("b"), os.O_RDWR, 0)
	if err == nil {
		show("unlink of an open file", nil, os.Remove(p("b")))
		var st syscall.Stat_t
		err := syscall.Fstat(int(h.Fd()), &st)
		show("fstat of an unlinked open file", st.Nlink, err)
		_, err = h.WriteString("z")
		show("write to an unlinked open file", nil, err)
		h.Close()
	}
	showOf("after")(lstat(p("a")))
	show("mkfifo", nil, syscall.Mkfifo(p("fifo"), 0o600))
	showOf("fifo")(lstat(p("fifo")))
	show("replace a fifo with a file", nil, os.Rename(p("a"), p("fifo")))
	show("name of 255 bytes", nil, write(p(strings.Repeat("n", 255)), os.O_CREATE|os.O_WRONLY, "1", -1))
	show("name of 256 bytes", nil, write(p(strings.Repeat("n", 256)), os.O_CREATE|os.O_WRONLY, "1", -1))
	show("mkdir of 256 bytes", nil, os.Mkdir(p(strings.Repeat("m", 256)), 0o755))
	showOf("listing")(list())
	show("rmdir", nil, errors.Join(os.Remove(p("dir", "f")), os.Remove(p("dir"))))
	showOf("listing at the end")(list())
	return out
}

func must(s string, _ error) string { return s }
