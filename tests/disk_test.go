package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// hostFreeMB is the free space of the file system that holds the host's
// root (and, on this machine kind, Docker's data and the disk pool).
func hostFreeMB(t *testing.T) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/", &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize >> 20
}

// mustHaveDisk fails a test whose workspace got no disk (the sidecar could
// not keep disks here: its log says why).
func (h *Harness) mustHaveDisk(w pclient.Workspace, mb int64) {
	h.t.Helper()
	if w.DiskMB != mb {
		h.t.Fatalf("exp workspace %s to have a disk of %d MB, got %d (sidecar log:\n%s)", w.Name, mb, w.DiskMB, lastLines(h.Logs(), 20))
	}
}

// A workspace writes as much as it can everywhere it can: its files, its
// container's own file system (/root, /tmp, /var/tmp: the image layer),
// its sessions' state. Every write stops at its disk's size with ENOSPC,
// the host's free space drops by at most that size, and the sidecar and
// another workspace carry on; the workspace itself still runs commands
// and recovers by deleting.
func TestHostileDiskFill(t *testing.T) {
	h := Start(t)
	const limit = 256
	w := h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "filler", DiskMB: limit})
	h.mustHaveDisk(w, limit)
	by := h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "bystander"})
	if by.DiskMB <= 0 {
		t.Fatalf("exp a default disk for a workspace that names none, got %d", by.DiskMB)
	}
	before := hostFreeMB(t)
	res := h.ExecReq(w.Name, "default", pclient.ExecRequest{TimeoutMS: 120_000, Command: `
		for f in /workspace/fill /root/fill /tmp/fill /var/tmp/fill /.patina/state/fill /fill; do
			dd if=/dev/zero of=$f bs=1M count=1024 conv=fsync 2>&1 | grep -c 'No space left'
		done
		fallocate -l 4G /workspace/falloc 2>&1
		truncate -s 1T /workspace/sparse && dd if=/dev/zero of=/workspace/sparse bs=1M seek=500000 count=64 conv=notrunc 2>&1 | grep -c 'No space left'
		df -m / | tail -1`})
	after := hostFreeMB(t)
	if n := strings.Count(res.Stdout, "1\n"); n < 7 {
		t.Fatalf("exp every write to end with ENOSPC (7), got %d:\n%s\nstderr: %s", n, res.Stdout, res.Stderr)
	}
	if !strings.Contains(res.Stdout, "No space left on device") {
		t.Fatalf("exp fallocate past the disk to fail with ENOSPC:\n%s", res.Stdout)
	}
	if lost := before - after; lost > limit+128 {
		t.Fatalf("exp the host to lose at most the disk's %d MB, lost %d MB", limit, lost)
	}
	got, err := h.Client.GetWorkspace(context.Background(), w.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got.DiskUsedMB == nil || *got.DiskUsedMB < limit/2 {
		t.Fatalf("exp the workspace to show its disk full, got %v", got.DiskUsedMB)
	}
	h.responsive(by.Name)
	if out := h.Out(by.Name, "default", "head -c 20M /dev/zero > /workspace/x && sync && echo wrote"); out != "wrote\n" {
		t.Fatalf("the other workspace could not write: %q", out)
	}
	// The full workspace still runs commands and recovers by deleting.
	out := h.Out(w.Name, "default", "rm -f /workspace/fill /root/fill /tmp/fill /var/tmp/fill /.patina/state/fill /fill /workspace/sparse; sync; sleep 1; head -c 10M /dev/zero > /workspace/again && echo recovered")
	if !strings.Contains(out, "recovered") {
		t.Fatalf("exp the workspace to write again after deleting, got %q", out)
	}
}

// A fork clones its source's disk: a sparse file stays sparse, the data
// is shared until written (the fork takes next to nothing of the host),
// the fork has its own limit, and its own writes do not touch the source.
func TestHostileForkSparseFile(t *testing.T) {
	h := Start(t)
	w := h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "sparse-src", DiskMB: 1024})
	h.mustHaveDisk(w, 1024)
	h.Out(w.Name, "default", "truncate -s 15T /workspace/sparse.bin && head -c 300M /dev/urandom > /workspace/data && apt-get --version >/dev/null; echo installed > /root/pkg; sync")
	before := hostFreeMB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	f, err := h.Client.ForkWorkspace(ctx, w.Name, pclient.ForkWorkspaceRequest{Name: "sparse-fork"})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	after := hostFreeMB(t)
	h.mustHaveDisk(f, 1024)
	if lost := before - after; lost > 100 {
		t.Fatalf("exp the fork to share its source's data, the host lost %d MB (fork took %s)", lost, took)
	}
	out := h.Out(f.Name, "default", "stat -c '%s %b' /workspace/sparse.bin; stat -c %s /workspace/data; cat /root/pkg")
	if exp := "16492674416640 0\n314572800\ninstalled\n"; out != exp {
		t.Fatalf("exp the fork to hold the sparse file (15 TiB, no blocks), the data and the container's own files:\nexp %q\ngot %q", exp, out)
	}
	// The fork's writes are its own and bounded by its own limit.
	res := h.Exec(f.Name, "default", "dd if=/dev/zero of=/workspace/more bs=1M count=2048 2>&1 | grep -c 'No space left'; rm -f /workspace/data; sync")
	if res.Stdout != "1\n" {
		t.Fatalf("exp the fork's disk to end at its limit: %q %q", res.Stdout, res.Stderr)
	}
	if out := h.Out(w.Name, "default", "stat -c %s /workspace/data; ls /workspace/more 2>&1 | grep -c 'No such'"); out != "314572800\n1\n" {
		t.Fatalf("exp the source untouched by its fork's writes, got %q", out)
	}
	t.Logf("fork of a workspace holding 300 MB and a 15 TiB sparse file: %s, host space used %d MB", took.Round(time.Millisecond), before-after)
}

// TestForkCount: several forks of one source at once share its data (the
// host loses little), keep its sparse file sparse, are each their own, and
// are made all or none: a name taken half-way leaves none of them.
func TestForkCount(t *testing.T) {
	h := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w := h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "many-src", DiskMB: 1024})
	h.mustHaveDisk(w, 1024)
	h.Out(w.Name, "default", "truncate -s 1T /workspace/sparse.bin && head -c 200M /dev/urandom > /workspace/data; cd /workspace; export WHO=src; sync")
	before := hostFreeMB(t)
	start := time.Now()
	forks, err := h.Client.ForkWorkspaces(ctx, w.Name, pclient.ForkWorkspaceRequest{Name: "many", Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if lost := before - hostFreeMB(t); lost > 100 {
		t.Fatalf("exp 3 forks to share their source's data, the host lost %d MB", lost)
	}
	if len(forks) != 3 {
		t.Fatalf("exp 3 forks, got %d", len(forks))
	}
	for i, f := range forks {
		if exp := fmt.Sprintf("many-%d", i+1); f.Name != exp || f.ForkOf != w.ID {
			t.Fatalf("fork %d: %+v, exp name %s, fork_of %s", i, f, exp, w.ID)
		}
		h.mustHaveDisk(f, 1024)
		if out := h.Out(f.Name, "default", "pwd; echo $WHO; stat -c '%s %b' sparse.bin; stat -c %s data"); out != "/workspace\nsrc\n1099511627776 0\n209715200\n" {
			t.Fatalf("fork %s: %q", f.Name, out)
		}
	}
	h.Out("many-1", "default", "echo mine > /workspace/own; rm /workspace/data")
	if out := h.Out("many-2", "default", "ls /workspace"); out != "data\nsparse.bin\n" {
		t.Fatalf("a fork saw another's writes: %q", out)
	}
	// All or none: the second name is taken, so none is kept.
	h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "again-2", DiskMB: 64})
	if _, err := h.Client.ForkWorkspaces(ctx, w.Name, pclient.ForkWorkspaceRequest{Name: "again", Count: 3}); !IsCode(err, pclient.CodeConflict) {
		t.Fatalf("forks into a taken name: %v, want a 409", err)
	}
	if _, err := h.Client.GetWorkspace(ctx, "again-1"); !IsCode(err, pclient.CodeNotFound) {
		t.Fatalf("a failed count left its first fork: %v", err)
	}
	for _, bad := range []int{17, -1} {
		if _, err := h.Client.ForkWorkspaces(ctx, w.Name, pclient.ForkWorkspaceRequest{Name: "x", Count: bad}); !IsCode(err, pclient.CodeInvalid) {
			t.Fatalf("count %d: %v, want a 400", bad, err)
		}
	}
	t.Logf("3 forks of a workspace holding 200 MB and a 1 TiB sparse file: %s", took.Round(time.Millisecond))
}
