package builder

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"

	"github.com/patina-dev/patina/sidecar/template"
)

// checkSource refuses a source that would make the engine fetch anything:
// an ADD of a URL, a variable in FROM, a FROM, --from or image that is not
// already on the engine (the classic builder would pull it), or one that
// carries ONBUILD triggers (they run in the build unchecked). Nothing is
// pulled: images are only inspected. It sets BaseImageID for an image.
func (m *Manager) checkSource(ctx context.Context, src *template.Source) error {
	if src.Config.Image != "" && src.Config.Dockerfile == "" {
		id, err := m.localImage(ctx, src.File, src.Config.Image)
		if err != nil {
			return err
		}
		src.BaseImageID = id
		return nil
	}
	c, err := template.CheckDockerfile(cmpOr(src.Config.Dockerfile, "the Dockerfile"), src.Dockerfile)
	if err != nil {
		return err
	}
	if c.Run && m.cfg.Runtime != "" {
		info, err := m.api.Info(ctx)
		if err != nil {
			return fmt.Errorf("ask the engine for its default runtime: %w", err)
		}
		if info.DefaultRuntime != m.cfg.Runtime {
			return fmt.Errorf("%w: %s has RUN steps, but the engine's builder runs them under its default runtime %s, not this sidecar's %s: move them to onCreateCommand (it runs under %s), or start from an image that has what they install", template.ErrInvalid, src.Config.Dockerfile, info.DefaultRuntime, m.cfg.Runtime, m.cfg.Runtime)
		}
	}
	for _, ref := range c.Images {
		if _, err := m.localImage(ctx, src.Config.Dockerfile, ref); err != nil {
			return err
		}
	}
	return nil
}

// localImage inspects an image the template starts from, never pulling.
func (m *Manager) localImage(ctx context.Context, file, ref string) (string, error) {
	insp, err := m.api.ImageInspect(ctx, ref)
	if errdefs.IsNotFound(err) {
		return "", fmt.Errorf("%w: %s: image %s is not on the engine: templates are built offline, from images already there (e.g. patina/base:bookworm); load or build it on the engine first", template.ErrInvalid, file, ref)
	}
	if err != nil {
		return "", fmt.Errorf("%s: image %s: %w", file, ref, err)
	}
	if insp.Config != nil && len(insp.Config.OnBuild) > 0 {
		return "", fmt.Errorf("%w: %s: image %s has ONBUILD triggers, which a template build would run unchecked: start from an image without them", template.ErrInvalid, file, ref)
	}
	return insp.ID, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
