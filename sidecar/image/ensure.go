package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/jsonmessage"
)

// Ensure makes sure req.Ref is present in the Docker engine: present is
// success; otherwise it is pulled, with the pull's progress logged at info
// level. A pull is bounded by Config.PullTimeout and abandoned after
// Config.PullIdleTimeout without a progress message, so an unreachable
// registry cannot hang it. When the pull fails the error wraps ErrMissing
// (and the pull's error) and says what to do: for the default image, run
// `patina image build`; for another image, build or load it.
func (m *Manager) Ensure(ctx context.Context, req EnsureRequest) error {
	ref := req.Ref
	if ref == "" {
		ref = DefaultTag
	}
	log := m.log
	if req.Logger != nil {
		log = req.Logger.With("component", "image")
	}
	log = log.With("image", ref)
	_, _, ok, err := m.inspect(ctx, ref)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	log.Info("image not present; pulling it")
	start := time.Now()
	err = m.pull(ctx, ref, log)
	if err == nil {
		log.Info("image pulled", "duration", time.Since(start).Round(time.Millisecond))
		return nil
	}
	if ctx.Err() != nil { // the caller gave up; that says nothing about the image
		return fmt.Errorf("image pull %s: %w", ref, ctx.Err())
	}
	log.Warn("image pull failed", "err", err)
	if isDefault(ref) {
		return fmt.Errorf("%w: %s is not present and could not be pulled (%w); run `patina image build` to build it offline from the host's Debian mirror (needs root and debootstrap)", ErrMissing, ref, err)
	}
	return fmt.Errorf("%w: %s is not present and could not be pulled (%w); build or load it into this Docker engine yourself (docker build, docker load), or use the default image %s", ErrMissing, ref, err, DefaultTag)
}

// errPullStalled ends a pull that reported nothing for PullIdleTimeout.
var errPullStalled = errors.New("pull stalled")

// pull pulls ref, logging each new status of each layer at info level (the
// many "Downloading" updates in between at debug).
func (m *Manager) pull(ctx context.Context, ref string, log *slog.Logger) error {
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, m.cfg.PullTimeout,
		fmt.Errorf("pull took longer than %s", m.cfg.PullTimeout))
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := m.cfg.PullIdleTimeout
	stall := time.AfterFunc(idle, func() {
		cancel(fmt.Errorf("%w: no progress for %s", errPullStalled, idle))
	})
	defer stall.Stop()

	// cause prefers why ctx ended (timeout, stall) to what the read saw.
	cause := func(err error) error {
		if c := context.Cause(ctx); c != nil {
			return c
		}
		return err
	}
	rc, err := m.api.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		return cause(err)
	}
	defer rc.Close()
	last := map[string]string{} // layer ID -> last status logged
	err = readMessages(rc, func(msg jsonmessage.JSONMessage) {
		stall.Reset(idle)
		if last[msg.ID] == msg.Status {
			if msg.Progress != nil {
				log.Debug("pull", "id", msg.ID, "status", msg.Status, "current", msg.Progress.Current, "total", msg.Progress.Total)
			}
			return
		}
		last[msg.ID] = msg.Status
		if msg.ID != "" {
			log.Info("pull", "id", msg.ID, "status", msg.Status)
		} else {
			log.Info("pull", "status", msg.Status)
		}
	})
	if err != nil {
		return cause(err)
	}
	return cause(nil)
}

// readMessages decodes a Docker JSON message stream to its end, handing each
// message to fn (if not nil); an error message ends it with that error.
func readMessages(r io.Reader, fn func(jsonmessage.JSONMessage)) error {
	dec := json.NewDecoder(r)
	for {
		var msg jsonmessage.JSONMessage
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if msg.Error != nil {
			return msg.Error
		}
		if msg.ErrorMessage != "" {
			return errors.New(msg.ErrorMessage)
		}
		if fn != nil {
			fn(msg)
		}
	}
}
