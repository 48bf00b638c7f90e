package builder

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	pcontainer "github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/sidecar/template"
)

// What a snapshot copies out of the workspace's container, and where in
// the template's filesystem (the agent plants it: inside.SeedDir).
var snapshotPaths = []string{"/workspace", "/.patina/state"}

const (
	seedParent = "/.patina"
	seedName   = "seed"
	// snapshotCleanupTimeout bounds each step of undoing a snapshot's work.
	snapshotCleanupTimeout = 2 * time.Minute
)

// containerLabels are the labels patina gives a workspace's container
// and a snapshot's work: never a template's.
var containerLabels = []string{
	pcontainer.LabelWorkspace, pcontainer.LabelName, pcontainer.LabelRepo, pcontainer.LabelStateDir,
	pcontainer.LabelRole, pcontainer.LabelAgentInit, pcontainer.LabelForkOf, template.LabelBuild,
}

// The values of template.LabelBuild on a snapshot's work: its helper
// container, and the image committed from the workspace (the template's
// parent once it is made).
const (
	snapshotWork = "snapshot"
	snapshotBase = "snapshot-base"
)

// Sweep removes what a snapshot of this sidecar left when it was killed
// half-way: its helper container, and the image committed from the
// workspace if no template was made from it. Call it at start, before any
// snapshot.
func (m *Manager) Sweep(ctx context.Context) {
	own := filters.NewArgs(filters.Arg("label", pcontainer.LabelStateDir+"="+m.cfg.StateDir))
	cs := own.Clone()
	cs.Add("label", template.LabelBuild+"="+snapshotWork)
	list, err := m.api.ContainerList(ctx, container.ListOptions{All: true, Filters: cs})
	if err != nil {
		m.log.Warn("sweep: list a snapshot's helper containers", "err", err)
		return
	}
	for _, c := range list {
		if err := m.api.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil {
			m.log.Warn("sweep: remove a snapshot's helper container", "container", c.ID, "err", err)
		}
	}
	is := own.Clone()
	is.Add("label", template.LabelBuild+"="+snapshotBase)
	imgs, err := m.api.ImageList(ctx, image.ListOptions{Filters: is})
	if err != nil {
		m.log.Warn("sweep: list a snapshot's images", "err", err)
		return
	}
	for _, im := range imgs {
		// A template's parent is not listed (it has a child); one that is
		// has none: a snapshot that did not end.
		if _, err := m.api.ImageRemove(ctx, im.ID, imageRemoveOptions); err != nil {
			m.log.Warn("sweep: remove a snapshot's image", "image", im.ID, "err", err)
		}
	}
	if len(list)+len(imgs) > 0 {
		m.log.Info("removed what an interrupted snapshot left", "containers", len(list), "images", len(imgs))
	}
}

// imageRemoveOptions removes an image patina made, and its untagged
// parents.
var imageRemoveOptions = image.RemoveOptions{PruneChildren: true}

// Snapshot saves a workspace's container as the template src.Name: its
// filesystem (what it installed), and under /.patina/seed its files and
// sessions' state, which the agent of a workspace made from the template
// plants before its sessions open. The container is paused meanwhile (a
// consistent copy; its commands wait). The workspace's bytes go from the
// engine back to the engine as the archive the engine made (never
// unpacked here), counted against src.MaxBytes with the container's own
// changes.
func (m *Manager) Snapshot(ctx context.Context, src template.SnapshotSource) (template.Template, error) {
	if err := template.ValidName(src.Name); err != nil {
		return template.Template{}, err
	}
	release, err := m.lock(ctx, "name:"+src.Name)
	if err != nil {
		return template.Template{}, err
	}
	defer release()
	if _, err := m.Get(ctx, src.Name); err == nil {
		return template.Template{}, fmt.Errorf("%w: %q: remove it first (patina template rm %s) or give another name", template.ErrExists, src.Name, src.Name)
	} else if !errors.Is(err, template.ErrNotFound) {
		return template.Template{}, err
	}
	start := time.Now()
	insp, err := m.api.ContainerInspect(ctx, src.ContainerID)
	if err != nil {
		return template.Template{}, fmt.Errorf("inspect the container of workspace %s: %w", src.Workspace, err)
	}
	env := keptEnv(insp.Config, src.Clear)
	// A commit keeps the container's labels (a workspace's: its id, its
	// sidecar's state directory...) and containers made from an image get
	// the image's: each is blanked, so that nothing made from the snapshot
	// passes for the workspace or for the snapshot's work.
	labels := func(set map[string]string) map[string]string {
		out := map[string]string{}
		for _, k := range containerLabels {
			out[k] = ""
		}
		maps.Copy(out, set)
		return out
	}
	// Undoing (unpause, removals) is done even when the caller went, within
	// a deadline of its own.
	cleanup := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), snapshotCleanupTimeout)
	}
	if err := m.api.ContainerPause(ctx, src.ContainerID); err != nil {
		return template.Template{}, fmt.Errorf("pause workspace %s: %w", src.Workspace, err)
	}
	paused := true
	unpause := func() {
		if paused {
			paused = false
			cctx, cancel := cleanup()
			defer cancel()
			if err := m.api.ContainerUnpause(cctx, src.ContainerID); err != nil {
				m.log.Warn("snapshot: unpause the workspace", "workspace", src.Workspace, "err", err)
			}
		}
	}
	defer unpause()
	tooLarge := func() error {
		return fmt.Errorf("%w: workspace %s holds more than %d MiB in its container's changes, /workspace and its sessions' state", template.ErrTooLarge, src.Workspace, src.MaxBytes>>20)
	}
	// The commit writes the container's own changes into the engine's
	// storage as they read: a sparse file at its full length (truncate -s
	// 10T takes no disk in the workspace and 10 TB in the commit). The
	// engine's measure of them (the files' lengths), taken while the
	// container is paused, counts against the bound first.
	sized, _, err := m.api.ContainerInspectWithRaw(ctx, src.ContainerID, true)
	if err != nil {
		return template.Template{}, fmt.Errorf("measure the container of workspace %s: %w", src.Workspace, err)
	}
	if sized.SizeRw == nil {
		return template.Template{}, fmt.Errorf("measure the container of workspace %s: the engine gave no size", src.Workspace)
	}
	copied := *sized.SizeRw
	if src.MaxBytes > 0 && copied > src.MaxBytes {
		return template.Template{}, tooLarge()
	}
	// Not cancelled with the caller: the engine goes on committing anyway,
	// and the image it makes must be known to be removed.
	base, err := m.api.ContainerCommit(context.WithoutCancel(ctx), src.ContainerID, container.CommitOptions{
		Comment: "patina: workspace " + src.Workspace + " (snapshot " + src.Name + ")",
		Config: &container.Config{Env: env, Labels: labels(map[string]string{
			pcontainer.LabelManaged: "1", template.LabelBuild: snapshotBase, pcontainer.LabelStateDir: m.cfg.StateDir,
		})},
	})
	if err != nil {
		return template.Template{}, fmt.Errorf("save the container of workspace %s: %w", src.Workspace, err)
	}
	removeBase := func() {
		cctx, cancel := cleanup()
		defer cancel()
		_, _ = m.api.ImageRemove(cctx, base.ID, imageRemoveOptions)
	}
	c, err := m.api.ContainerCreate(ctx, &container.Config{
		Image: base.ID, Entrypoint: []string{"/bin/true"}, Cmd: []string{},
		Labels: labels(map[string]string{template.LabelBuild: snapshotWork, pcontainer.LabelStateDir: m.cfg.StateDir}),
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		removeBase()
		return template.Template{}, fmt.Errorf("save workspace %s: %w", src.Workspace, err)
	}
	defer func() {
		cctx, cancel := cleanup()
		_ = m.api.ContainerRemove(cctx, c.ID, container.RemoveOptions{Force: true})
		cancel()
		// The template's image holds it as its parent; without a template
		// it goes.
		removeBase()
	}()
	if err := m.api.CopyToContainer(ctx, c.ID, seedParent, seedDirArchive(), container.CopyToContainerOptions{}); err != nil {
		return template.Template{}, fmt.Errorf("save workspace %s: %w", src.Workspace, err)
	}
	for _, p := range snapshotPaths {
		rc, _, err := m.api.CopyFromContainer(ctx, src.ContainerID, p)
		if err != nil {
			return template.Template{}, fmt.Errorf("read %s of workspace %s: %w", p, src.Workspace, err)
		}
		lr := &limitedReader{r: rc, left: src.MaxBytes - copied, bounded: src.MaxBytes > 0}
		err = m.api.CopyToContainer(ctx, c.ID, seedParent+"/"+seedName, lr, container.CopyToContainerOptions{})
		rc.Close()
		copied += lr.read
		if lr.over {
			return template.Template{}, tooLarge()
		}
		if err != nil {
			return template.Template{}, fmt.Errorf("save %s of workspace %s: %w", p, src.Workspace, err)
		}
	}
	unpause()
	spec := template.Spec{Source: "workspace " + src.Workspace, Env: src.Env, Snapshot: src.Workspace}
	specJSON, _ := json.Marshal(spec)
	var id [16]byte
	_, _ = rand.Read(id[:])
	hash := "snapshot-" + hex.EncodeToString(id[:])
	if _, err := m.api.ContainerCommit(context.WithoutCancel(ctx), c.ID, container.CommitOptions{
		Reference: template.Ref(src.Name),
		Comment:   "patina template " + src.Name + ": a snapshot of workspace " + src.Workspace,
		Config: &container.Config{
			Env: env, Entrypoint: []string{}, Cmd: []string{"/bin/bash"}, WorkingDir: "/workspace",
			Labels: labels(map[string]string{template.LabelHash: hash, template.LabelSpec: string(specJSON), pcontainer.LabelManaged: "1"}),
		},
	}); err != nil {
		return template.Template{}, fmt.Errorf("save template %s: %w", src.Name, err)
	}
	t, err := m.Get(ctx, src.Name)
	if err != nil {
		return template.Template{}, err
	}
	t.Built = true
	m.log.Info("workspace saved as a template", "template", t.Name, "workspace", src.Workspace, "bytes", copied, "duration", time.Since(start).Round(time.Millisecond))
	return t, nil
}

// keptEnv is the container's environment less the variables named in
// clear, as the image's environment; a cleared one is kept empty, since
// a commit keeps every variable of the container it is not given.
func keptEnv(cfg *container.Config, clear []string) []string {
	var env []string
	if cfg != nil {
		env = slices.Clone(cfg.Env)
	}
	drop := map[string]bool{}
	for _, k := range clear {
		drop[k] = true
	}
	out := env[:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(drop)) {
		out = append(out, k+"=")
	}
	return out
}

// seedDirArchive is a tar holding the empty directory seed/.
func seedDirArchive() io.Reader {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: seedName + "/", Mode: 0o700})
	_ = tw.Close()
	return &b
}

// limitedReader passes at most left bytes, then fails (over).
type limitedReader struct {
	r       io.Reader
	left    int64
	bounded bool
	read    int64
	over    bool
}

var errOverBound = errors.New("over the bound")

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.bounded && l.left <= 0 {
		// At the bound: over only if more follows.
		var one [1]byte
		if n, _ := l.r.Read(one[:]); n > 0 {
			l.over = true
			return 0, errOverBound
		}
		return 0, io.EOF
	}
	if l.bounded && int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.read += int64(n)
	l.left -= int64(n)
	return n, err
}
