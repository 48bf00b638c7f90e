//go:build linux

package image

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// lockTag takes the cross-process build lock of tag: an exclusive flock on
// <dir>/patina-image-<tag>.lock. It polls every poll until it gets the lock
// or ctx ends, so a waiting build can be cancelled. The lock goes with the
// process if it dies; the returned func releases it.
func lockTag(ctx context.Context, dir, tag string, poll time.Duration, log *slog.Logger) (func(), error) {
	path := filepath.Join(dir, "patina-image-"+lockName(tag)+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("build lock: %w", err)
	}
	unlock := func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}
	var tick *time.Ticker
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			if tick != nil {
				tick.Stop()
			}
			return unlock, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("build lock %s: %w", path, err)
		}
		if tick == nil {
			log.Info("waiting for another build of the same image", "lock", path)
			tick = time.NewTicker(poll)
		}
		select {
		case <-ctx.Done():
			tick.Stop()
			f.Close()
			return nil, fmt.Errorf("build lock %s: %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}

// lockName turns an image tag into a file name.
func lockName(tag string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, tag)
}
