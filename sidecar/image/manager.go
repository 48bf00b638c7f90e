package image

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/docker/docker/client"
)

// Manager ensures, pulls and builds workspace images through a Docker engine.
// It is safe for concurrent use.
type Manager struct {
	cfg Config
	api ImageAPI
	log *slog.Logger
}

// New returns a Manager that talks to Docker through api (a *client.Client)
// and logs to logger (nil: nowhere).
func New(cfg Config, api ImageAPI, logger *slog.Logger) *Manager {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg.withDefaults(), api: api, log: logger.With("component", "image")}
}

// inspect returns the ID and size of ref; ok is false when it is absent.
func (m *Manager) inspect(ctx context.Context, ref string) (id string, size int64, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.APITimeout)
	defer cancel()
	resp, err := m.api.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("image inspect %s: %w", ref, err)
	}
	return resp.ID, resp.Size, true, nil
}

// isDefault reports whether ref names DefaultTag, spelled short or in full
// (with the default registry's host name).
func isDefault(ref string) bool {
	a, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return false
	}
	b, _ := reference.ParseNormalizedNamed(DefaultTag)
	return a.String() == b.String()
}

// EnsureBuilt makes sure the default image is present, building it with
// default settings when it is not; progress receives the build's output
// (nil: discarded). It talks to the Docker engine the environment names
// (DOCKER_HOST ...). It is meant for tests in other packages that need a
// workspace image; concurrent callers, in any process, build it once.
func EnsureBuilt(ctx context.Context, logger *slog.Logger, progress io.Writer) error {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	_, err = New(Config{}, cli, logger).Build(ctx, BuildRequest{IfMissing: true, Progress: progress})
	return err
}
