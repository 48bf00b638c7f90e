package workspace

import (
	"context"
	"errors"
	"fmt"

	"github.com/patina-dev/patina/sidecar/engine"
)

// movedNotice is what the API says of a workspace made before the object
// stores whose container still runs with the user's object directories
// mounted.
const movedNotice = "its container still mounts its repository's whole object directory (every branch, and objects other workspaces sent); stop and start it to give it objects of its own"

// readyObjects makes sure that the object stores a repository workspace
// borrows from are there before its container starts: made again if one
// is missing; acquired for a workspace that has none (a legacy workspace
// just migrated); and for a workspace made before the stores, whose
// container mounts the user's object directories, acquired and its
// container made anew with them (what it installed outside /workspace is
// kept: the old container is committed to an image the new one runs).
// A workspace of that kind whose container runs is left as it is, with a
// warning: moving it would stop what runs there.
func (w *workspace) readyObjects(ctx context.Context, legacy bool) error {
	m := w.m
	w.mu.Lock()
	md, repo := w.meta, w.repo
	w.mu.Unlock()
	if len(md.Objects) > 0 {
		stores := make([]string, len(md.Objects))
		for i, o := range md.Objects {
			stores[i] = storeOf(o)
		}
		if _, err := m.stores.ensure(ctx, repo, stores, false); err != nil {
			return fmt.Errorf("make the workspace's object stores again: %w", err)
		}
		return nil
	}
	if len(md.ObjectDirs) > 0 && md.ContainerID != "" {
		if st, err := m.eng.Inspect(ctx, md.ContainerID); err == nil && st.Running {
			m.log.Warn("the workspace's container still mounts its repository's object directory; stop and start it to move it to object stores", "workspace_id", md.ID)
			return nil
		}
	}
	commit := md.BaseCommit
	if legacy {
		// Its repository starts from the branch's tip (Init with
		// KeepFiles): commits made in the legacy worktree included.
		if wt, err := repo.Get(ctx, md.ID); err == nil && wt.Head != "" {
			commit = wt.Head
		}
	}
	objs, err := m.stores.acquire(ctx, repo, commit)
	if err != nil {
		return err
	}
	defer m.stores.release(objs)
	moved := md
	if len(md.ObjectDirs) > 0 {
		if err := w.remakeContainer(ctx, &moved); err != nil {
			return err // the stores stay until the sidecar's next start or a retry
		}
	}
	w.mu.Lock()
	w.meta.Objects = objs
	w.meta.ObjectDirs = nil
	w.meta.ContainerID, w.meta.Image, w.meta.MovedImage = moved.ContainerID, moved.Image, moved.MovedImage
	if w.notice == movedNotice {
		w.notice = ""
	}
	w.mu.Unlock()
	if len(md.ObjectDirs) > 0 {
		m.log.Info("workspace moved to object stores", "workspace_id", md.ID, "image", moved.Image)
	}
	return w.save(ctx)
}

// remakeContainer commits the workspace's (stopped) container to an image
// and removes it: start makes it anew from that image, with the mounts its
// record now names.
func (w *workspace) remakeContainer(ctx context.Context, md *meta) error {
	m := w.m
	if md.ContainerID == "" {
		return nil
	}
	ref := "patina/moved:" + md.ID
	switch err := m.eng.Commit(ctx, md.ContainerID, md.ID, ref); {
	case err == nil:
		md.Image, md.MovedImage = ref, ref
	case errors.Is(err, engine.ErrNotFound):
		// Gone: nothing outside the volumes to keep.
	default:
		return fmt.Errorf("keep the workspace's container to move it to object stores: %w", err)
	}
	if err := m.eng.Remove(ctx, md.ContainerID); err != nil && !errors.Is(err, engine.ErrNotFound) {
		if md.MovedImage != "" {
			_ = m.eng.RemoveImage(context.WithoutCancel(ctx), md.MovedImage)
		}
		return fmt.Errorf("remove the workspace's old container: %w", err)
	}
	md.ContainerID = ""
	return nil
}
