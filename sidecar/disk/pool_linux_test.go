//go:build linux

package disk

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPool opens a pool of 2 GiB in a temporary directory, or skips where
// disks cannot be had (not root, no mkfs.xfs, no loop devices).
func openPool(t *testing.T) *Pool {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: mounts loop devices")
	}
	dir := t.TempDir()
	pl, err := Open(context.Background(), Config{Dir: filepath.Join(dir, "disks"), PoolMB: 2048, Owner: "test"})
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("no disks here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := removePool(filepath.Join(dir, "disks")); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return pl
}

// allocated is the space a file takes on its file system.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func TestDiskFillsToItsSizeOnly(t *testing.T) {
	pl := openPool(t)
	ctx := context.Background()
	dir, err := pl.Create(ctx, "ws-1", 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{FilesDir, StateDir, LayerDir} {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Fatalf("exp directory %s on the disk: %v", d, err)
		}
	}
	var before unix.Statfs_t
	if err := unix.Statfs(pl.p.poolMount(), &before); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, FilesDir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	var werr error
	for i := 0; i < 200 && werr == nil; i++ {
		_, werr = f.Write(buf)
	}
	if werr == nil {
		werr = f.Sync()
	}
	f.Close()
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("exp ENOSPC writing 200 MiB on a 64 MiB disk, got %v", werr)
	}
	var after unix.Statfs_t
	if err := unix.Statfs(pl.p.poolMount(), &after); err != nil {
		t.Fatal(err)
	}
	if used := int64(before.Bavail-after.Bavail) * after.Bsize; used > 80<<20 {
		t.Fatalf("exp the pool to lose at most the disk's 64 MiB, lost %d MiB", used>>20)
	}
	u, err := pl.Usage("ws-1")
	if err != nil || u.SizeMB < 48 || u.SizeMB > 64 || u.UsedMB < u.SizeMB-4 {
		t.Fatalf("exp a full 64 MiB disk, got %+v %v", u, err)
	}
	// What is deleted goes back to the pool (discard).
	if err := os.Remove(filepath.Join(dir, FilesDir, "fill")); err != nil {
		t.Fatal(err)
	}
	// (ext4 sends some discards at the next commit, some later.)
	deadline := time.Now().Add(20 * time.Second)
	for {
		syncFS(t, dir)
		got := allocated(t, pl.p.image("ws-1"))
		if got <= 16<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exp the image to shrink after a delete, still %d MiB", got>>20)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestCloneSharesAndKeepsSparse(t *testing.T) {
	pl := openPool(t)
	ctx := context.Background()
	dir, err := pl.Create(ctx, "src", 512)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, FilesDir, "data")
	f, err := os.Create(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(f, zeroless{}, 64<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A sparse file far bigger than the disk.
	if err := os.Truncate(filepath.Join(dir, FilesDir, "sparse"), 1<<40); err != nil {
		if err := os.WriteFile(filepath.Join(dir, FilesDir, "sparse"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(filepath.Join(dir, FilesDir, "sparse"), 1<<40); err != nil {
			t.Fatal(err)
		}
	}
	var before unix.Statfs_t
	syncFS(t, dir)
	if err := unix.Statfs(pl.p.poolMount(), &before); err != nil {
		t.Fatal(err)
	}
	fork, err := pl.Clone(ctx, "src", "fork")
	if err != nil {
		t.Fatal(err)
	}
	var after unix.Statfs_t
	if err := unix.Statfs(pl.p.poolMount(), &after); err != nil {
		t.Fatal(err)
	}
	if used := int64(before.Bavail-after.Bavail) * after.Bsize; used > 10<<20 {
		t.Fatalf("exp a clone to take at most 10 MiB of the pool, took %d MiB", used>>20)
	}
	fi, err := os.Stat(filepath.Join(fork, FilesDir, "sparse"))
	if err != nil || fi.Size() != 1<<40 {
		t.Fatalf("exp the sparse file in the fork: %v %v", fi, err)
	}
	if got := allocated(t, filepath.Join(fork, FilesDir, "sparse")); got != 0 {
		t.Fatalf("exp the fork's sparse file to stay sparse, it takes %d bytes", got)
	}
	// Each side writes its own copy.
	if err := os.WriteFile(filepath.Join(fork, FilesDir, "data"), []byte("fork"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(data); err != nil || fi.Size() != 64<<20 {
		t.Fatalf("exp the source unchanged by the fork's write: %v %v", fi, err)
	}
	// The source is not left frozen.
	if err := os.WriteFile(filepath.Join(dir, FilesDir, "after"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ids, err := pl.Owned()
	if err != nil || len(ids) != 2 {
		t.Fatalf("exp two disks, got %v %v", ids, err)
	}
	other := *pl
	other.cfg.Owner = "another sidecar"
	if ids, err := other.Owned(); err != nil || len(ids) != 0 {
		t.Fatalf("exp no disks of another owner, got %v %v", ids, err)
	}
	if err := pl.Remove(ctx, "fork"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pl.p.image("fork")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("exp the fork's image gone, got %v", err)
	}
	if _, err := pl.Clone(ctx, "nope", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("exp ErrNotFound cloning a missing disk, got %v", err)
	}
}

func TestMountAgainAndRefuse(t *testing.T) {
	pl := openPool(t)
	ctx := context.Background()
	if _, err := pl.Create(ctx, "../x", 64); !errors.Is(err, ErrInvalid) {
		t.Fatalf("exp ErrInvalid for a bad id, got %v", err)
	}
	if _, err := pl.Create(ctx, "small", 8); !errors.Is(err, ErrInvalid) {
		t.Fatalf("exp ErrInvalid for a disk under the minimum, got %v", err)
	}
	if _, err := pl.Create(ctx, "big", pl.SizeMB()+1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("exp ErrInvalid for a disk over the pool, got %v", err)
	}
	dir, err := pl.Create(ctx, "w", 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pl.Create(ctx, "w", 64); !errors.Is(err, ErrExists) {
		t.Fatalf("exp ErrExists, got %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, StateDir, "keep"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	// As after a reboot: unmounted, then mounted again by Mount.
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := pl.Mount(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, StateDir, "keep")); err != nil || string(b) != "kept" {
		t.Fatalf("exp the file back after mounting again: %q %v", b, err)
	}
	if _, err := pl.Mount(ctx, "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("exp ErrNotFound, got %v", err)
	}
	if err := RemoveOwned(pl.p.dir, "test"); err != nil {
		t.Fatal(err)
	}
	if ids, _ := pl.Owned(); len(ids) != 0 {
		t.Fatalf("exp RemoveOwned to remove every disk of its owner, left %v", ids)
	}
	// Open again finds the pool mounted and keeps it.
	pl2, err := Open(ctx, pl.cfg)
	if err != nil || pl2.SizeMB() != pl.SizeMB() {
		t.Fatalf("exp the same pool again: %v", err)
	}
}

func syncFS(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
}

// zeroless reads as a stream of non-zero bytes (a file of zeros could be
// stored sparse).
type zeroless struct{}

func (zeroless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i%251) + 1
	}
	return len(p), nil
}
