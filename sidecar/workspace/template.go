package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"

	"github.com/patina-dev/patina/sidecar/template"
	"github.com/patina-dev/patina/worktree"
)

// Templates makes and finds templates (sidecar/template/builder).
type Templates interface {
	Make(ctx context.Context, src template.Source) (template.Template, error)
	Snapshot(ctx context.Context, src template.SnapshotSource) (template.Template, error)
	Get(ctx context.Context, name string) (template.Template, error)
}

// maxDockerfileBytes bounds a Dockerfile read from a repository.
const maxDockerfileBytes = 1 << 20

// BuildTemplate makes a repository's template (or finds the one its
// content made), sending the build's output to progress.
func (m *Manager) BuildTemplate(ctx context.Context, req BuildTemplateRequest, progress io.Writer) (template.Template, error) {
	if m.cfg.Templates == nil {
		return template.Template{}, fmt.Errorf("%w: this sidecar makes no templates", ErrUnsupported)
	}
	if err := req.Validate(); err != nil {
		return template.Template{}, err
	}
	src, ok, err := m.templateSource(ctx, req.Repo, req.Base, req.Dockerfile)
	if err != nil {
		return template.Template{}, err
	}
	if !ok {
		return template.Template{}, fmt.Errorf("%w: %s has no .devcontainer/devcontainer.json or .devcontainer.json; name a Dockerfile (--dockerfile)", ErrInvalid, req.Repo)
	}
	src.Name = req.Name
	src.Progress = progress
	return m.cfg.Templates.Make(ctx, src)
}

// templateSource reads what makes a repository's template at base: the
// Dockerfile named, else its devcontainer.json (ok false: neither).
func (m *Manager) templateSource(ctx context.Context, repoPath, base, dockerfile string) (template.Source, bool, error) {
	r, err := m.repo(ctx, repoPath)
	if err != nil {
		return template.Source{}, false, repoError(repoPath, err)
	}
	commit, err := r.ResolveRev(ctx, base)
	if errors.Is(err, worktree.ErrNotFound) {
		err = fmt.Errorf("%w: base: %w", ErrInvalid, err)
	}
	if err != nil {
		return template.Source{}, false, err
	}
	src := template.Source{Repo: r.Root()}
	switch {
	case dockerfile != "":
		t, err := r.PathType(ctx, commit, dockerfile)
		if err != nil {
			return template.Source{}, false, fmt.Errorf("%w: dockerfile: %v", ErrInvalid, err)
		}
		if t != "blob" {
			return template.Source{}, false, fmt.Errorf("%w: dockerfile %q is not a file of %s at %.12s", ErrInvalid, dockerfile, r.Root(), commit)
		}
		df := path.Clean(dockerfile)
		dir := path.Dir(df)
		if dir == "." {
			dir = ""
		}
		src.File = df
		src.Raw = []byte("dockerfile:" + df)
		src.Config = template.Devcontainer{Dockerfile: df, Context: dir}
	default:
		for _, p := range template.ConfigPaths {
			t, err := r.PathType(ctx, commit, p)
			if err != nil {
				return template.Source{}, false, err
			}
			if t != "blob" {
				continue
			}
			raw, err := r.ReadBlob(ctx, commit, p, template.MaxConfigBytes)
			if errors.Is(err, worktree.ErrTooLarge) {
				return template.Source{}, false, fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalid, p, template.MaxConfigBytes)
			}
			if err != nil {
				return template.Source{}, false, err
			}
			cfg, err := template.ParseDevcontainer(p, raw)
			if err != nil {
				return template.Source{}, false, err
			}
			src.File, src.Raw, src.Config = p, raw, cfg
			break
		}
		if src.File == "" {
			return template.Source{}, false, nil
		}
	}
	if src.Config.Dockerfile == "" { // an image: the template manager checks it is here (never pulled)
		return src, true, nil
	}
	src.Dockerfile, err = r.ReadBlob(ctx, commit, src.Config.Dockerfile, maxDockerfileBytes)
	switch {
	case errors.Is(err, worktree.ErrNotFound):
		return template.Source{}, false, fmt.Errorf("%w: %s: the Dockerfile %s is not a file of the repository at %.12s", ErrInvalid, src.File, src.Config.Dockerfile, commit)
	case errors.Is(err, worktree.ErrTooLarge):
		return template.Source{}, false, fmt.Errorf("%w: the Dockerfile %s is larger than %d bytes", ErrInvalid, src.Config.Dockerfile, maxDockerfileBytes)
	case err != nil:
		return template.Source{}, false, err
	}
	// The context is read by the template manager, one at a time.
	file, dir := src.File, src.Config.Context
	src.LoadContext = func(ctx context.Context) ([]byte, error) {
		data, err := r.Archive(ctx, commit, dir, m.cfg.MaxTemplateContext)
		switch {
		case errors.Is(err, worktree.ErrNotFound):
			return nil, fmt.Errorf("%w: %s: the build context %q is not a directory of the repository", ErrInvalid, file, dir)
		case errors.Is(err, worktree.ErrTooLarge):
			return nil, fmt.Errorf("%w: the build context %q is larger than %d MiB: make the context a smaller directory", ErrInvalid, dir, m.cfg.MaxTemplateContext>>20)
		}
		return data, err
	}
	return src, true, nil
}

// createTemplate gives a create its template: the one named, or for a
// repository that names no image, the one its devcontainer.json (or the
// Dockerfile named) makes. It sets the request's image and adds the
// template's environment under the request's own.
func (m *Manager) createTemplate(ctx context.Context, req *CreateRequest, imageGiven bool) (template.Template, error) {
	if req.Template != "" && (imageGiven || req.Dockerfile != "") {
		return template.Template{}, fmt.Errorf("%w: template names the image: give template, image or dockerfile, not several", ErrInvalid)
	}
	if req.Dockerfile != "" && imageGiven {
		return template.Template{}, fmt.Errorf("%w: dockerfile makes the image: give dockerfile or image, not both", ErrInvalid)
	}
	if req.Dockerfile != "" && req.Repo == "" {
		return template.Template{}, fmt.Errorf("%w: dockerfile is a path in the repository: give repo too", ErrInvalid)
	}
	if (req.Template != "" || req.Dockerfile != "") && m.cfg.Templates == nil {
		return template.Template{}, fmt.Errorf("%w: this sidecar makes no templates", ErrUnsupported)
	}
	var t template.Template
	switch {
	case req.Template != "":
		var err error
		if t, err = m.cfg.Templates.Get(ctx, req.Template); err != nil {
			if errors.Is(err, template.ErrNotFound) {
				err = fieldError("template", err) // a field names nothing: 400
			}
			return template.Template{}, err
		}
	case req.Repo != "" && !imageGiven && m.cfg.Templates != nil && m.eng.Local():
		src, ok, err := m.templateSource(ctx, req.Repo, req.Base, req.Dockerfile)
		if err != nil || !ok {
			return template.Template{}, err
		}
		src.Progress = &logWriter{log: m.log, repo: req.Repo}
		if t, err = m.cfg.Templates.Make(ctx, src); err != nil {
			return template.Template{}, err
		}
	default:
		return template.Template{}, nil
	}
	if t.Snapshot != "" && req.Repo != "" {
		return template.Template{}, fmt.Errorf("%w: template %s is a saved workspace (%s): it brings that workspace's files and repository; create without repo", ErrInvalid, t.Name, t.Snapshot)
	}
	req.Image = t.Ref
	if len(t.Env) > 0 {
		env := maps.Clone(t.Env)
		maps.Copy(env, req.Env)
		req.Env = env
	}
	return t, nil
}

// logWriter logs a build's output at debug level, a line at a time.
type logWriter struct {
	log  interface{ Debug(string, ...any) }
	repo string
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.log.Debug("template build", "repo", l.repo, "output", string(p))
	return len(p), nil
}
