package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
)

// caseExec runs the workers of one case in some execution mode.
type caseExec interface {
	// start runs a worker; a process worker is killed once deadline has
	// passed.
	start(ctx context.Context, spec WorkerSpec, deadline time.Duration) (runningWorker, error)
	history() (history.Log, error)
	snapshot(ctx context.Context, c Case, env CaseEnv, space string, h history.Log) (check.Snapshot, check.Observed, error)
	close()
}

// runningWorker is one running worker.
type runningWorker interface {
	// waitHitOrExit returns once the worker reported a failpoint hit or
	// ended.
	waitHitOrExit(ctx context.Context, limit time.Duration)
	// release lets a paused worker continue.
	release()
	// wait returns the worker's result once it ended.
	wait() WorkerResult
}

// processCase runs workers as OS processes (the crashmatrix binary or a
// re-executed test binary) killed by SIGKILL.
type processCase struct {
	r        *Runner
	dir      string
	histPath string
}

func (r *Runner) newProcessCase(dir string, env CaseEnv) (*processCase, error) {
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "calls"), 0o755); err != nil {
		return nil, err
	}
	return &processCase{r: r, dir: dir, histPath: filepath.Join(dir, "history.jsonl")}, nil
}

func (p *processCase) history() (history.Log, error) { return history.Read(p.histPath) }

func (p *processCase) close() {}

func (p *processCase) snapshot(ctx context.Context, c Case, env CaseEnv, space string, h history.Log) (check.Snapshot, check.Observed, error) {
	return p.r.snapshot(ctx, c, env, space, h)
}

type processWorker struct {
	spec WorkerSpec
	hist string
	done chan WorkerResult
	res  *WorkerResult
}

func (p *processCase) start(ctx context.Context, spec WorkerSpec, deadline time.Duration) (runningWorker, error) {
	_, done, err := p.r.start(ctx, p.dir, spec, deadline)
	if err != nil {
		return nil, err
	}
	return &processWorker{spec: spec, hist: p.histPath, done: done}, nil
}

func (w *processWorker) wait() WorkerResult {
	if w.res == nil {
		r := <-w.done
		w.res = &r
	}
	return *w.res
}

func (w *processWorker) release() {
	_ = os.WriteFile(w.spec.ReleaseFile, nil, 0o644)
}

func (w *processWorker) waitHitOrExit(ctx context.Context, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if h, err := history.Read(w.hist); err == nil {
			for _, r := range h {
				if r.Worker == w.spec.Worker && r.Phase == w.spec.Phase && (r.Kind == history.Hit || r.Kind == history.Exit) {
					return
				}
			}
		}
		select {
		case r := <-w.done:
			w.res = &r
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// waitRelease is a process worker's pause: stall d, then until the
// supervisor releases it (so the interleaving is the same on every run).
func waitRelease(ctx context.Context, file string, d time.Duration) {
	t := time.NewTimer(d)
	select {
	case <-ctx.Done():
		t.Stop()
		return
	case <-t.C:
	}
	if file == "" {
		return
	}
	// A release normally comes within a few lease TTLs; the stall d is
	// one of those, so the wait grows with the timings in use.
	deadline := time.Now().Add(2*time.Minute + 10*d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, err := os.Stat(file); err == nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// start launches a worker with its failpoints armed through GO_FAILPOINTS
// and a deadline, after which its whole process group is killed; the
// returned channel yields its result.
func (r *Runner) start(ctx context.Context, dir string, spec WorkerSpec, deadline time.Duration) (*exec.Cmd, chan WorkerResult, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, err
	}
	specPath := filepath.Join(dir, fmt.Sprintf("worker-%d-%s.json", spec.Phase, spec.Worker))
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		return nil, nil, err
	}
	cmd := r.cfg.Launcher.Command(ctx, specPath)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(filterEnv(cmd.Env, "GO_FAILPOINTS"), "GO_FAILPOINTS="+faults.EnvValue(spec.Arms))
	var stderr strings.Builder
	cmd.Stderr = &limitedWriter{w: &stderr, n: 8192}
	cmd.Stdout = &limitedWriter{w: &stderr, n: 8192}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	r.procs.Store(cmd, struct{}{})
	done := make(chan WorkerResult, 1)
	go func() {
		timer := time.AfterFunc(deadline, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		err := cmd.Wait()
		timedOut := !timer.Stop()
		stop()
		r.procs.Delete(cmd)
		wr := WorkerResult{Worker: spec.Worker, PID: cmd.Process.Pid, Took: time.Since(t0)}
		var ee *exec.ExitError
		switch {
		case timedOut:
			wr.Exit = "timeout"
		case err == nil:
			wr.Exit = "ok"
		case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
			wr.Exit = "killed (SIGKILL)"
		default:
			wr.Exit = fmt.Sprintf("error: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		done <- wr
	}()
	return cmd, done, nil
}

// snapshot opens the backend afresh (as a new process would) and reads the
// stores, and distils the history.
func (r *Runner) snapshot(ctx context.Context, c Case, env CaseEnv, space string, h history.Log) (check.Snapshot, check.Observed, error) {
	obs := Observe(h, c, space)
	st, err := r.backend.Open(ctx, env)
	if err != nil {
		return check.Snapshot{}, obs, err
	}
	defer st.Close()
	var ps PlanSaveStores
	if c.System == faults.PlanSave && r.backend.OpenPlanSave != nil {
		if ps, err = r.backend.OpenPlanSave(ctx, env); err != nil {
			return check.Snapshot{}, obs, err
		}
		if ps.Closer != nil {
			defer ps.Closer.Close()
		}
	}
	snap, err := check.Take(ctx, st, space, ps.Checkpoints, ps.Plans, obs.Threads)
	return snap, obs, err
}
