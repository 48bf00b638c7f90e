package inside

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// CopyTree copies the tree under from into to (which exists), as `cp -a`
// would without following any link: directories, regular files, symbolic
// links (as links) and FIFOs, with their modes, owners and modification
// times. Devices and sockets are left out. Nothing is written through a
// link: every file is created new (O_EXCL|O_NOFOLLOW). It runs inside a
// helper container whose only mounts are the two trees (see
// container.Docker.CopyVolumes), to fork a workspace.
func CopyTree(from, to string) error {
	type dirTime struct {
		path string
		mod  time.Time
	}
	var dirs []dirTime
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		switch mode := fi.Mode(); {
		case mode.IsDir():
			if rel != "." {
				if err := os.Mkdir(dst, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
					return err
				}
			}
			dirs = append(dirs, dirTime{dst, fi.ModTime()})
		case mode.IsRegular():
			if err := copyFile(p, dst); err != nil {
				return err
			}
		case mode&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
		case mode&os.ModeNamedPipe != 0:
			if err := unix.Mkfifo(dst, 0o600); err != nil {
				return err
			}
		default:
			return nil // devices, sockets: not carried
		}
		if st != nil {
			if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
				return err
			}
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			if err := os.Chmod(dst, fi.Mode().Perm()|fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky)); err != nil {
				return err
			}
			if !fi.IsDir() {
				_ = os.Chtimes(dst, fi.ModTime(), fi.ModTime())
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("copy %s to %s: %w", from, to, err)
	}
	// Directories last, deepest first: copying into them changed their times.
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Chtimes(dirs[i].path, dirs[i].mod, dirs[i].mod)
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
