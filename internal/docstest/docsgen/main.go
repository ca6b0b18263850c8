// Command docsgen writes the program output the docs quote (`make docs`).
//
//	docsgen -bin DIR FILE...
//
// runs the command of every block marked <!-- output: COMMAND --> in the
// Markdown files, with DIR's crashmatrix first on PATH, each in a fresh
// folder, and writes what it printed into the block; and writes each
// section docstest.Generated knows (<!-- begin windows --> …) from the code.
//
//	docsgen -section NAME FILE
//
// copies its standard input to its standard output and then writes it into
// the section NAME of FILE (between <!-- begin NAME --> and
// <!-- end NAME -->), under a line giving the date, the machine and its load
// average: how the load check's summary reaches docs/performance.md.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/crashmatrix/crashmatrix/internal/docstest"
)

func main() {
	bin := flag.String("bin", "bin", "folder holding the crashmatrix binary the commands run")
	section := flag.String("section", "", "write standard input into this section of the one FILE")
	flag.Parse()
	var err error
	if *section != "" {
		err = writeSection(*section, flag.Args())
	} else {
		err = regenerate(*bin, flag.Args())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "docsgen:", err)
		os.Exit(1)
	}
}

func regenerate(bin string, files []string) error {
	if len(files) == 0 {
		return fmt.Errorf("no Markdown file named")
	}
	binDir, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(binDir, "crashmatrix")); err != nil {
		return fmt.Errorf("-bin %s: %w (make build)", bin, err)
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "docsgen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	r := docstest.Runner{Root: root, BinDir: binDir}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		text := string(data)
		blocks, err := docstest.Blocks(text)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		// From the last block up, so that the earlier blocks' offsets hold.
		n := 0
		for i := len(blocks) - 1; i >= 0; i-- {
			cmd, ok := blocks[i].OutputCommand()
			if !ok {
				continue
			}
			out, code, err := r.Run(work, cmd)
			if err != nil {
				return fmt.Errorf("%s:%d: %w", f, blocks[i].Line, err)
			}
			if code > 2 {
				return fmt.Errorf("%s:%d: %s exited %d (crashmatrix exits 0, 1 or 2):\n%s", f, blocks[i].Line, cmd, code, out)
			}
			text = docstest.ReplaceBody(text, blocks[i], out)
			n++
		}
		for name, gen := range docstest.Generated {
			if _, ok := docstest.Section(text, name); ok {
				text = docstest.ReplaceSection(text, name, gen())
				n++
			}
		}
		if n == 0 {
			continue
		}
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			return err
		}
		fmt.Printf("%s: %d output blocks and sections written\n", f, n)
	}
	return nil
}

func writeSection(name string, files []string) error {
	if len(files) != 1 {
		return fmt.Errorf("-section %s: name exactly one Markdown file, not %d", name, len(files))
	}
	old, err := os.ReadFile(files[0])
	if err != nil {
		return err
	}
	start, load := time.Now().UTC(), docstest.LoadAverage()
	var buf bytes.Buffer
	if _, err := io.Copy(io.MultiWriter(os.Stdout, &buf), os.Stdin); err != nil {
		return err
	}
	if buf.Len() == 0 {
		return fmt.Errorf("-section %s: nothing on standard input; %s left as it was", name, files[0])
	}
	body := fmt.Sprintf("Written by `make %s` from %s to %s, %s, on %s (%s/%s); load average %s at the start, %s at the end.\n\n```text\n%s```\n",
		name, start.Format("2006-01-02 15:04"), time.Now().UTC().Format("15:04 UTC"), docstest.GitCommit(files[0]), docstest.Machine(runtime.NumCPU()), runtime.GOOS, runtime.GOARCH, load, docstest.LoadAverage(), buf.String())
	return os.WriteFile(files[0], []byte(docstest.ReplaceSection(string(old), name, body)), 0o644)
}
