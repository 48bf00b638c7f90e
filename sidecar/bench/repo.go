package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RepoSpec shapes a generated repository: Files files at its head, in 50
// directories, and a history of HistoryBytes of random (incompressible)
// content rewritten commit after commit in a set of churned files, so that
// nearly all of it is packed history, not files checked out.
type RepoSpec struct {
	// Dir is made (it must not exist, or be empty).
	Dir string
	// Files at the head (default 10,000).
	Files int
	// HistoryBytes of random content in the history, beside the files'
	// first versions (0: none).
	HistoryBytes int64
	// Seed makes the content (the same seed, the same repository).
	Seed uint64
}

// Shape of the history: each commit rewrites churnPerCommit of churnFiles
// files with churnBlob bytes each.
const (
	churnFiles     = 200
	churnPerCommit = 16
	churnBlob      = 64 << 10
	repoDirs       = 50
)

// MakeRepo writes a repository of spec's shape with git fast-import, on
// branch main, its files checked out.
func MakeRepo(ctx context.Context, spec RepoSpec) error {
	if spec.Files <= 0 {
		spec.Files = 10_000
	}
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return err
	}
	git := func(stdin io.Reader, args ...string) error {
		c := exec.CommandContext(ctx, "git", args...)
		c.Dir = spec.Dir
		c.Stdin = stdin
		c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := git(nil, "init", "-q", "-b", "main"); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeHistory(pw, spec)) }()
	err := git(pr, "-c", "core.compression=1", "-c", "pack.compression=1", "fast-import", "--quiet", "--done")
	pr.CloseWithError(errors.New("fast-import ended"))
	if err != nil {
		return err
	}
	return git(nil, "reset", "-q", "--hard", "main")
}

// writeHistory writes spec's history as a fast-import stream.
func writeHistory(w io.Writer, spec RepoSpec) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	rng := rand.New(rand.NewChaCha8(seed32(spec.Seed)))
	path := func(i int) string { return fmt.Sprintf("d%02d/f%05d.txt", i%repoDirs, i) }
	when := int64(1_700_000_000)
	commit := func(msg string) {
		when += 60
		fmt.Fprintf(bw, "commit refs/heads/main\ncommitter bench <bench@localhost> %d +0000\ndata %d\n%s\n", when, len(msg), msg)
	}
	blob := func(p string, content []byte) {
		fmt.Fprintf(bw, "M 100644 inline %s\ndata %d\n", p, len(content))
		bw.Write(content)
		bw.WriteByte('\n')
	}
	commit("initial")
	for i := 0; i < spec.Files; i++ {
		blob(path(i), fmt.Appendf(nil, "file %d %016x\n", i, rng.Uint64()))
	}
	buf := make([]byte, churnBlob)
	churned := min(churnFiles, spec.Files)
	for n, written := 1, int64(0); written < spec.HistoryBytes; n++ {
		commit(fmt.Sprintf("change %d", n))
		for j := 0; j < churnPerCommit && written < spec.HistoryBytes; j++ {
			for k := 0; k+8 <= len(buf); k += 8 {
				v := rng.Uint64()
				for b := 0; b < 8; b++ {
					buf[k+b] = byte(v >> (8 * b))
				}
			}
			blob(path(rng.IntN(churned)), buf)
			written += int64(len(buf))
		}
		if err := bw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(bw, "done\n")
	return bw.Flush()
}

// seed32 spreads a seed over ChaCha8's 32 bytes.
func seed32(s uint64) (b [32]byte) {
	for i := range b {
		b[i] = byte(s >> (8 * (i % 8)))
	}
	b[31] ^= 0x5a
	return b
}

// RepoPackBytes is the size of a repository's packs.
func RepoPackBytes(dir string) int64 {
	var n int64
	packs, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "*.pack"))
	for _, p := range packs {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}
