package container

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/docker/docker/api/types/storage"
	"github.com/docker/docker/api/types/system"

	"github.com/patina-dev/patina/sidecar/engine"
)

// A workspace with a disk (sidecar/disk) keeps everything it writes there:
// its files and state are bind mounts of the disk's directories, and its
// container's writable layer — what it installs, what it writes under
// /root or /tmp — is the disk's layer directory, bind-mounted over the
// directory the engine's storage driver keeps that layer in before the
// container starts (overlay2 and fuse-overlayfs keep a container's layer in
// a directory of its own, GraphDriver.Data.UpperDir/WorkDir, and mount it
// at each start). So writing past the disk's size gives ENOSPC inside, and
// the host's free space is not touched. The first bind in a process is
// checked through the engine (a file written on the disk must be what the
// engine sees in the container): an engine in another mount namespace
// would not see the disk, and the workspace then has no disk limit, so the
// create fails instead.

// ErrDiskUnsupported: engine.ErrDiskUnsupported.
var ErrDiskUnsupported = engine.ErrDiskUnsupported

// infoAPI is the engine's system info (its storage driver).
type infoAPI interface {
	Info(ctx context.Context) (system.Info, error)
}

// Storage drivers whose container layer is a directory of its own.
var diskDrivers = map[string]bool{"overlay2": true, "fuse-overlayfs": true}

// DiskSupport says whether workspaces on this engine can have disks: nil,
// or why not (wrapping ErrDiskUnsupported).
func (d *Docker) DiskSupport(ctx context.Context) error {
	d.diskMu.Lock()
	defer d.diskMu.Unlock()
	if d.diskChecked {
		return d.diskErr
	}
	err := d.diskSupport(ctx)
	if err != nil && !errors.Is(err, ErrDiskUnsupported) {
		return err // the engine did not answer: ask again next time
	}
	d.diskChecked, d.diskErr = true, err
	return err
}

func (d *Docker) diskSupport(ctx context.Context) error {
	if !d.local {
		return fmt.Errorf("%w: the engine is not on the sidecar's host", ErrDiskUnsupported)
	}
	ia, ok := d.api.(infoAPI)
	if !ok {
		return fmt.Errorf("%w: this Docker client cannot tell the engine's storage driver", ErrDiskUnsupported)
	}
	info, err := ia.Info(ctx)
	if err != nil {
		return fmt.Errorf("ask the engine for its storage driver: %w", err)
	}
	if !diskDrivers[info.Driver] {
		return fmt.Errorf("%w: its storage driver is %s (patina keeps a workspace's container layer on its disk with overlay2 or fuse-overlayfs)", ErrDiskUnsupported, info.Driver)
	}
	return nil
}

// layerDirOf is the directory holding a container's writable layer
// (diff/, work/ and the driver's notes), from what the engine reports.
func layerDirOf(gd storage.DriverData) (string, error) {
	up, work := gd.Data["UpperDir"], gd.Data["WorkDir"]
	dir := filepath.Dir(up)
	if !diskDrivers[gd.Name] || !filepath.IsAbs(up) || filepath.Clean(up) != up ||
		filepath.Base(up) != "diff" || work != filepath.Join(dir, "work") || dir == "/" {
		return "", fmt.Errorf("%w: the engine keeps the container's layer where patina does not expect it (%s: %q, %q)", ErrDiskUnsupported, gd.Name, up, work)
	}
	return dir, nil
}
