//go:build linux

package image

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// writeTar writes the tree under root to w as a tar archive for Docker's
// image import, with the names GNU tar gives it ("./", "./bin" ...) and
// numeric owners only (no user or group names). It keeps permissions
// including setuid, setgid and sticky bits, ownership, symlinks (never
// followed), hard links (stored once, then as links), device nodes and FIFOs;
// it skips sockets, extended attributes and the contents of directories that
// are mount points (as tar --one-file-system does). A relative path for which
// skip returns true is left out, and so is everything beneath it. ctx is
// checked between entries.
func writeTar(ctx context.Context, w io.Writer, root string, skip func(rel string) bool) error {
	tw := tar.NewWriter(w)
	var rootDev uint64
	if fi, err := os.Lstat(root); err != nil {
		return fmt.Errorf("tar %s: %w", root, err)
	} else if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		rootDev = uint64(st.Dev)
	}
	type inode struct{ dev, ino uint64 }
	links := map[inode]string{} // first name of each multiply linked file
	buf := make([]byte, 256<<10)

	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel != "." && skip != nil && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Type() == fs.ModeSocket {
			return nil
		}
		var target string
		if fi.Mode().Type() == fs.ModeSymlink {
			if target, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		hdr.Uname, hdr.Gname = "", ""
		hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
		hdr.Name = "./"
		if rel != "." {
			hdr.Name += rel
			if fi.IsDir() {
				hdr.Name += "/"
			}
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if st != nil && fi.Mode().IsRegular() && st.Nlink > 1 {
			key := inode{uint64(st.Dev), uint64(st.Ino)}
			if first, ok := links[key]; ok {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
			} else {
				links[key] = hdr.Name
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if hdr.Typeflag == tar.TypeReg && hdr.Size > 0 {
			if err := copyFile(tw, path, buf); err != nil {
				return err
			}
		}
		if fi.IsDir() && rel != "." && st != nil && uint64(st.Dev) != rootDev {
			return filepath.SkipDir // a mount point: its directory, not its contents
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("tar %s: %w", root, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("tar %s: %w", root, err)
	}
	return nil
}

// copyFile copies the file at path into the current tar entry.
func copyFile(tw *tar.Writer, path string, buf []byte) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyBuffer(tw, f, buf); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// skipUnder returns a skip function for writeTar that keeps each of dirs but
// leaves out what is in it.
func skipUnder(dirs ...string) func(rel string) bool {
	return func(rel string) bool {
		for _, d := range dirs {
			if strings.HasPrefix(rel, d+"/") {
				return true
			}
		}
		return false
	}
}
