package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/patina-dev/patina/sidecar/client"
)

func newWsCpCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a file into a workspace, or out of one",
		Long: `Copy one file between this machine and a workspace. One side is WS:PATH, a
workspace (name or id) and a path relative to its /workspace; the other a local
path. Into a workspace, parent directories are made and the file replaced; a
file larger than the sidecar's limit for one write is refused (413). Out of a
workspace, a DST that is a directory receives the file under its own name, and
the file is written whole or not at all (a temporary file, renamed at the end).

Bytes stream both ways: a large file is never held in memory. On a terminal a
progress line shows what has been copied; off one nothing is shown.`,
		Example: `  patina ws cp ./data.tar fix-tests:data/data.tar
  patina ws cp fix-tests:coverage.html .
  patina ws cp fix-tests:build/app ./app-linux`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("%s needs a source and a destination, one of them WS:PATH (got %d arguments)", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			srcWS, srcPath, srcRemote := remoteArg(args[0])
			dstWS, dstPath, dstRemote := remoteArg(args[1])
			switch {
			case srcRemote == dstRemote:
				return usagef("one of SRC and DST must be WS:PATH and the other a local path (got %q and %q)", args[0], args[1])
			case srcRemote && srcPath == "", dstRemote && dstPath == "":
				return usagef("WS:PATH needs a path after the colon (relative to the workspace's /workspace)")
			}
			return a.withClientWithin(cmd, copyWithin, func(ctx context.Context, c *client.Client) error {
				if dstRemote {
					return a.upload(ctx, c, args[0], dstWS, dstPath)
				}
				return a.download(ctx, c, srcWS, srcPath, args[1])
			})
		},
	}
	return cmd
}

// remoteArg splits WS:PATH (the part before the first colon has no slash,
// so ./a:b and /tmp/a:b are local paths; on Windows, neither is C:\a a
// workspace C).
func remoteArg(s string) (ws, p string, ok bool) {
	ws, p, ok = strings.Cut(s, ":")
	if !ok || ws == "" || strings.ContainsAny(ws, `/\`) || (runtime.GOOS == "windows" && len(ws) == 1) {
		return "", "", false
	}
	return ws, p, true
}

// upload copies the local file src to ws:dst.
func (a *app) upload(ctx context.Context, c *client.Client, src, ws, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return usagef("%s is not a regular file: ws cp copies one file", src)
	}
	if strings.HasSuffix(dst, "/") {
		dst += filepath.Base(src)
	}
	r := a.transfer(f, "copying "+filepath.Base(src)+" to "+ws, st.Size())
	defer r.done()
	return c.WriteFileFrom(ctx, ws, dst, r)
}

// download copies ws:src to the local path dst (into it, if a directory).
func (a *app) download(ctx context.Context, c *client.Client, ws, src, dst string) error {
	body, size, err := c.OpenFile(ctx, ws, src)
	if err != nil {
		return err
	}
	defer body.Close()
	if st, err := os.Stat(dst); err == nil && st.IsDir() {
		dst = filepath.Join(dst, path.Base(src))
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".patina-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a rename, nothing is there
	r := a.transfer(body, "copying "+path.Base(src)+" from "+ws, size)
	_, err = io.Copy(tmp, r)
	r.done()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s:%s: %w", ws, src, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// transferReader counts the bytes read through it, for a progress line.
type transferReader struct {
	r    io.Reader
	n    atomic.Int64
	done func()
}

func (t *transferReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.n.Add(int64(n))
	return n, err
}

// transfer wraps r with a progress line ("what: 12.0 MiB of 40.0 MiB
// (30%)") on stderr when it is a terminal (total < 0: unknown).
func (a *app) transfer(r io.Reader, what string, total int64) *transferReader {
	t := &transferReader{r: r, done: func() {}}
	f, ok := a.stderr.(*os.File)
	if !ok || !isTerminal(f) {
		return t
	}
	t.done = transferLine(f, what, total, t.n.Load)
	return t
}

// transferLine redraws what has been copied on w until done is called.
func transferLine(w io.Writer, what string, total int64, copied func() int64) (done func()) {
	return liveLine(w, func(int) string { return what + ": " + transferred(copied(), total) })
}

// transferred says how much of total (< 0: unknown) has been copied.
func transferred(n, total int64) string {
	if total <= 0 {
		return humanBytes(n)
	}
	return fmt.Sprintf("%s of %s (%d%%)", humanBytes(n), humanBytes(total), n*100/total)
}
