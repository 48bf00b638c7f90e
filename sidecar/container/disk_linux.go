//go:build linux

package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/patina-dev/patina/internal/mountinfo"
)

// Bounds on copying the driver's notes of a layer (a few small files and
// empty directories: link, lower, work/work).
const (
	maxLayerEntries = 256
	maxLayerFile    = 1 << 20
)

// BindDisk keeps a created or stopped container's writable layer on the
// workspace's disk mounted at disk: the disk's layer directory (with the
// layer of the container as it was: the driver's notes taken from the
// engine's directory, the layer's content kept from the disk) is
// bind-mounted over the engine's. Done already: nothing to do.
func (d *Docker) BindDisk(ctx context.Context, containerID, disk string) error {
	if err := d.DiskSupport(ctx); err != nil {
		return err
	}
	info, err := d.api.ContainerInspect(ctx, containerID)
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("container %s: %w", short(containerID), ErrNotFound)
	}
	if err != nil {
		return err
	}
	layerDir, err := layerDirOf(info.GraphDriver)
	if err != nil {
		return err
	}
	diskMount, ok, err := mountinfo.At(disk)
	if err != nil || !ok {
		return fmt.Errorf("the workspace's disk is not mounted at %s", disk)
	}
	if m, ok, _ := mountinfo.At(layerDir); ok {
		if m.Source == diskMount.Source && m.Root == "/layer" {
			return nil
		}
		return fmt.Errorf("something else is mounted over the layer of container %s (%s from %s)", short(containerID), m.FSType, m.Source)
	}
	if info.State != nil && info.State.Running {
		return fmt.Errorf("container %s runs with its layer off the workspace's disk: stop it first", short(containerID))
	}
	mine := filepath.Join(disk, "layer")
	if err := fillLayer(layerDir, mine); err != nil {
		return fmt.Errorf("put the layer of container %s on its disk: %w", short(containerID), err)
	}
	if err := unix.Mount(mine, layerDir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("put the layer of container %s on its disk: %w", short(containerID), err)
	}
	if d.diskSeen.Load() {
		return nil
	}
	if err := d.engineSeesDisk(ctx, containerID, mine); err != nil {
		_ = unix.Unmount(layerDir, unix.MNT_DETACH)
		return err
	}
	d.diskSeen.Store(true)
	return nil
}

// engineSeesDisk checks that the engine reads the container's layer from
// the disk: a file made there must be in the container (as the engine's
// copy API finds it: an empty file, read in one go).
func (d *Docker) engineSeesDisk(ctx context.Context, containerID, mine string) error {
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := ".patina-disk-" + hex.EncodeToString(b[:])
	diff := filepath.Join(mine, "diff")
	if fi, err := os.Lstat(diff); err != nil || !fi.IsDir() {
		return fmt.Errorf("the disk's layer has no diff directory")
	}
	probe := filepath.Join(diff, name)
	f, err := os.OpenFile(probe, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	rc, _, statErr := d.api.CopyFromContainer(ctx, containerID, "/"+name)
	if statErr == nil {
		rc.Close()
	}
	os.Remove(probe)
	if statErr != nil {
		return fmt.Errorf("%w: the engine does not see the sidecar's mounts (is one of them in another mount namespace?): %v", ErrDiskUnsupported, statErr)
	}
	return nil
}

// unbindDisk undoes BindDisk before the container is removed (the engine
// then removes its own directory, not the disk's content).
func (d *Docker) unbindDisk(ctx context.Context, containerID string) {
	if err := unbindLayer(ctx, d.api, containerID); err != nil {
		d.log.Warn("unmount a workspace's disk from its container's layer", "container", short(containerID), "err", err)
	}
}

func unbindLayer(ctx context.Context, api API, containerID string) error {
	info, err := api.ContainerInspect(ctx, containerID)
	if err != nil {
		return nil
	}
	layerDir, err := layerDirOf(info.GraphDriver)
	if err != nil {
		return nil
	}
	if m, ok, _ := mountinfo.At(layerDir); ok && m.Root == "/layer" {
		return unix.Unmount(layerDir, unix.MNT_DETACH)
	}
	return nil
}

// fillLayer makes mine the layer in dir, as the engine laid it out: every
// entry but diff/ is the engine's (replaced), diff/ (the layer's content)
// is the disk's own once it has one. Nothing under diff/ is read.
func fillLayer(dir, mine string) error {
	if err := os.Mkdir(mine, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if fi, err := os.Lstat(mine); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", mine)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(ents) > maxLayerEntries {
		return fmt.Errorf("the engine's layer directory has %d entries", len(ents))
	}
	theirs := map[string]bool{}
	budget := maxLayerEntries
	for _, e := range ents {
		name := e.Name()
		theirs[name] = true
		src, dst := filepath.Join(dir, name), filepath.Join(mine, name)
		if name == "diff" {
			if _, err := os.Lstat(dst); err == nil {
				continue
			}
			if err := copyEntry(src, dst, false, &budget); err != nil {
				return err
			}
			continue
		}
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		if err := copyEntry(src, dst, true, &budget); err != nil {
			return err
		}
	}
	old, err := os.ReadDir(mine)
	if err != nil {
		return err
	}
	for _, e := range old {
		if !theirs[e.Name()] && e.Name() != "diff" {
			if err := os.RemoveAll(filepath.Join(mine, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyEntry copies src (a directory, with its content when deep, a
// regular file or a symlink) to dst with its mode and owner.
func copyEntry(src, dst string, deep bool, budget *int) error {
	if *budget--; *budget < 0 {
		return errors.New("the engine's layer directory is larger than expected")
	}
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode().IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		if deep {
			ents, err := os.ReadDir(src)
			if err != nil {
				return err
			}
			for _, e := range ents {
				if err := copyEntry(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), true, budget); err != nil {
					return err
				}
			}
		}
	case fi.Mode().IsRegular():
		if fi.Size() > maxLayerFile {
			return fmt.Errorf("%s is larger than expected", src)
		}
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, io.LimitReader(in, maxLayerFile))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s: unexpected %s in the engine's layer directory", src, fi.Mode().Type())
	}
	if st != nil {
		if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return os.Chmod(dst, fi.Mode().Perm()|fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
	}
	return nil
}
