package template

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
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

// nameRE is a template's name: it becomes an image tag.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// ValidName checks a template's name.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: template name %q: want 1 to 63 of a-z, 0-9, '_', '.', '-', starting with a letter or digit", ErrInvalid, name)
	}
	return nil
}

// Make returns the template of src: the one its content made before, or
// a new build.
func (m *Manager) Make(ctx context.Context, src Source) (Template, error) {
	if src.Name != "" {
		if err := ValidName(src.Name); err != nil {
			return Template{}, err
		}
	}
	if err := m.checkSource(ctx, &src); err != nil {
		return Template{}, err
	}
	prep, err := m.prepareOne(ctx, &src)
	if err != nil {
		return Template{}, err
	}
	defer prep.remove()
	if src.Name == "" {
		src.Name = "dc-" + prep.hash[:12]
	}
	release, err := m.lock(ctx, prep.hash)
	if err != nil {
		return Template{}, err
	}
	defer release()
	if t, ok, err := m.byHash(ctx, prep.hash); err != nil {
		return Template{}, err
	} else if ok {
		if t.Name != src.Name {
			if err := m.api.ImageTag(ctx, t.ImageID, Ref(src.Name)); err != nil {
				return Template{}, fmt.Errorf("tag template %s: %w", src.Name, err)
			}
		}
		t.Name, t.Ref = src.Name, Ref(src.Name)
		return t, nil
	}
	start := time.Now()
	if err := m.build(ctx, src, prep); err != nil {
		return Template{}, err
	}
	t, err := m.Get(ctx, src.Name)
	if err != nil {
		return Template{}, err
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
func (m *Manager) byHash(ctx context.Context, hash string) (Template, bool, error) {
	list, err := m.api.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelHash+"="+hash))})
	if err != nil {
		return Template{}, false, fmt.Errorf("list templates: %w", err)
	}
	for _, s := range list {
		ts := fromSummary(s)
		if len(ts) > 0 {
			return ts[0], true, nil
		}
	}
	return Template{}, false, nil
}

// Get finds the template named name.
func (m *Manager) Get(ctx context.Context, name string) (Template, error) {
	if err := ValidName(name); err != nil {
		return Template{}, err
	}
	insp, err := m.api.ImageInspect(ctx, Ref(name))
	if errdefs.IsNotFound(err) {
		return Template{}, fmt.Errorf("%w: no template %q (patina template ls lists them)", ErrNotFound, name)
	}
	if err != nil {
		return Template{}, fmt.Errorf("inspect template %s: %w", name, err)
	}
	var labels map[string]string
	if insp.Config != nil {
		labels = insp.Config.Labels
	}
	if labels[LabelHash] == "" {
		return Template{}, fmt.Errorf("%w: no template %q (the image %s is not one)", ErrNotFound, name, Ref(name))
	}
	t := Template{Name: name, Ref: Ref(name), ImageID: insp.ID, Hash: labels[LabelHash], Size: insp.Size}
	_ = json.Unmarshal([]byte(labels[LabelSpec]), &t.Spec)
	if c, err := time.Parse(time.RFC3339Nano, insp.Created); err == nil {
		t.CreatedAt = c
	}
	return t, nil
}

// List returns every template, by name.
func (m *Manager) List(ctx context.Context) ([]Template, error) {
	list, err := m.api.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelHash))})
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	var out []Template
	for _, s := range list {
		out = append(out, fromSummary(s)...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// fromSummary is a template per patina-template tag of an image.
func fromSummary(s image.Summary) []Template {
	var spec Spec
	_ = json.Unmarshal([]byte(s.Labels[LabelSpec]), &spec)
	var out []Template
	for _, tag := range s.RepoTags {
		name, ok := strings.CutPrefix(tag, Repository+":")
		if !ok {
			continue
		}
		out = append(out, Template{
			Name: name, Ref: tag, ImageID: s.ID, Hash: s.Labels[LabelHash], Spec: spec,
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
	_, err := m.api.ImageRemove(ctx, Ref(name), image.RemoveOptions{PruneChildren: true})
	switch {
	case errdefs.IsConflict(err):
		return fmt.Errorf("%w: template %s: a workspace uses it; delete the workspace first", ErrInUse, name)
	case errdefs.IsNotFound(err):
		return fmt.Errorf("%w: no template %q", ErrNotFound, name)
	case err != nil:
		return fmt.Errorf("remove template %s: %w", name, err)
	}
	return nil
}
