package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// startProfile fetches a CPU profile of `seconds` from walrelay's listener
// at addr once start is closed, into ProfileDir/<name>.cpu.pprof. wait
// blocks until the fetch ended (bounded); failures are logged, not fatal.
func (e *env) startProfile(ctx context.Context, addr, name string, seconds int, start <-chan struct{}) (wait func()) {
	if e.cfg.ProfileDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+time.Minute)
	go func() {
		defer close(done)
		select {
		case <-start:
		case <-ctx.Done():
			return
		}
		path := filepath.Join(e.cfg.ProfileDir, name+".cpu.pprof")
		if err := fetchProfile(ctx, addr, seconds, path); err != nil {
			e.cfg.Log.Warn("capturing walrelay CPU profile", "path", path, "err", err)
			return
		}
		progress(e.cfg, "  CPU profile of walrelay (%ds): %s", seconds, path)
	}()
	return func() {
		select {
		case <-start:
		default:
			cancel() // the window never began: nothing to profile
		}
		select {
		case <-done:
		case <-time.After(time.Duration(seconds)*time.Second + 15*time.Second):
			e.cfg.Log.Warn("CPU profile still running; not waiting", "name", name)
		}
		cancel()
	}
}

// fetchProfile saves a CPU profile of `seconds` from walrelay's listener at
// addr into path.
func fetchProfile(ctx context.Context, addr string, seconds int, path string) error {
	body, err := get(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds))
	if err != nil {
		return err
	}
	defer body.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
