package builder

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/patina-dev/patina/sidecar/template"
)

// Manager makes, finds and removes templates.
type Manager struct {
	cfg Config
	api API
	log *slog.Logger

	mu       sync.Mutex
	building map[string]chan struct{} // by hash: one build of a content at a time

	// preparing admits one load and preparation of a build context at a
	// time: each holds up to MaxContextBytes in memory.
	preparing chan struct{}
}

// New returns a Manager.
func New(cfg Config, api API) *Manager {
	cfg = cfg.withDefaults()
	return &Manager{cfg: cfg, api: api, log: cfg.Logger.With("component", "template"), building: map[string]chan struct{}{}, preparing: make(chan struct{}, 1)}
}

// Make returns the template of src: the one its content made before, or
// a new build.
func (m *Manager) Make(ctx context.Context, src template.Source) (template.Template, error) {
	if src.Name != "" {
		if err := template.ValidName(src.Name); err != nil {
			return template.Template{}, err
		}
	}
	if err := m.checkSource(ctx, &src); err != nil {
		return template.Template{}, err
	}
	prep, err := m.prepareOne(ctx, &src)
	if err != nil {
		return template.Template{}, err
	}
	defer prep.remove()
	if src.Name == "" {
		src.Name = "dc-" + prep.hash[:12]
	}
	release, err := m.lock(ctx, prep.hash)
	if err != nil {
		return template.Template{}, err
	}
	defer release()
	if t, ok, err := m.byHash(ctx, prep.hash); err != nil {
		return template.Template{}, err
	} else if ok {
		if t.Name != src.Name {
			if err := m.api.ImageTag(ctx, t.ImageID, template.Ref(src.Name)); err != nil {
				return template.Template{}, fmt.Errorf("tag template %s: %w", src.Name, err)
			}
		}
		t.Name, t.Ref = src.Name, template.Ref(src.Name)
		return t, nil
	}
	start := time.Now()
	if err := m.build(ctx, src, prep); err != nil {
		return template.Template{}, err
	}
	t, err := m.Get(ctx, src.Name)
	if err != nil {
		return template.Template{}, err
	}
	t.Built = true
	m.log.Info("template built", "template", t.Name, "hash", t.Hash[:12], "repo", src.Repo, "duration", time.Since(start).Round(time.Millisecond))
	return t, nil
}

// lock serialises the builds of one content in this process.
func (m *Manager) lock(ctx context.Context, hash string) (func(), error) {
	for {
		m.mu.Lock()
		ch, busy := m.building[hash]
		if !busy {
			ch = make(chan struct{})
			m.building[hash] = ch
			m.mu.Unlock()
			return func() {
				m.mu.Lock()
				delete(m.building, hash)
				m.mu.Unlock()
				close(ch)
			}, nil
		}
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// byHash finds the template a content made.
func (m *Manager) byHash(ctx context.Context, hash string) (template.Template, bool, error) {
	list, err := m.api.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", template.LabelHash+"="+hash))})
	if err != nil {
		return template.Template{}, false, fmt.Errorf("list templates: %w", err)
	}
	for _, s := range list {
		ts := fromSummary(s)
		if len(ts) > 0 {
			return ts[0], true, nil
		}
	}
	return template.Template{}, false, nil
}

// Get finds the template named name.
func (m *Manager) Get(ctx context.Context, name string) (template.Template, error) {
	if err := template.ValidName(name); err != nil {
		return template.Template{}, err
	}
	insp, err := m.api.ImageInspect(ctx, template.Ref(name))
	if errdefs.IsNotFound(err) {
		return template.Template{}, fmt.Errorf("%w: no template %q (patina template ls lists them)", template.ErrNotFound, name)
	}
	if err != nil {
		return template.Template{}, fmt.Errorf("inspect template %s: %w", name, err)
	}
	var labels map[string]string
	if insp.Config != nil {
		labels = insp.Config.Labels
	}
	if labels[template.LabelHash] == "" {
		return template.Template{}, fmt.Errorf("%w: no template %q (the image %s is not one)", template.ErrNotFound, name, template.Ref(name))
	}
	t := template.Template{Name: name, Ref: template.Ref(name), ImageID: insp.ID, Hash: labels[template.LabelHash], Size: insp.Size}
	_ = json.Unmarshal([]byte(labels[template.LabelSpec]), &t.Spec)
	if c, err := time.Parse(time.RFC3339Nano, insp.Created); err == nil {
		t.CreatedAt = c
	}
	return t, nil
}

// List returns every template, by name.
func (m *Manager) List(ctx context.Context) ([]template.Template, error) {
	list, err := m.api.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", template.LabelHash))})
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	var out []template.Template
	for _, s := range list {
		out = append(out, fromSummary(s)...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// fromSummary is a template per patina-template tag of an image.
func fromSummary(s image.Summary) []template.Template {
	var spec template.Spec
	_ = json.Unmarshal([]byte(s.Labels[template.LabelSpec]), &spec)
	var out []template.Template
	for _, tag := range s.RepoTags {
		name, ok := strings.CutPrefix(tag, template.Repository+":")
		if !ok {
			continue
		}
		out = append(out, template.Template{
			Name: name, Ref: tag, ImageID: s.ID, Hash: s.Labels[template.LabelHash], Spec: spec,
			Size: s.Size, CreatedAt: time.Unix(s.Created, 0).UTC(),
		})
	}
	return out
}

// Remove removes the template named name (its tag; the image goes with
// its last tag). A workspace whose container uses it is ErrInUse.
func (m *Manager) Remove(ctx context.Context, name string) error {
	if _, err := m.Get(ctx, name); err != nil {
		return err
	}
	_, err := m.api.ImageRemove(ctx, template.Ref(name), image.RemoveOptions{PruneChildren: true})
	switch {
	case errdefs.IsConflict(err):
		return fmt.Errorf("%w: template %s: a workspace uses it; delete the workspace first", template.ErrInUse, name)
	case errdefs.IsNotFound(err):
		return fmt.Errorf("%w: no template %q", template.ErrNotFound, name)
	case err != nil:
		return fmt.Errorf("remove template %s: %w", name, err)
	}
	return nil
}
