package sidecar

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/image"
)

// newService starts a Service on port 0 with a fresh state directory
// against the real Docker engine (building the default image if absent),
// and returns a client for it. Everything it created is removed at the end.
func newService(t testing.TB) (*Service, *client.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Docker")
	}
	ctx := context.Background()
	if err := image.EnsureBuilt(ctx, nil, os.Stderr); err != nil {
		t.Fatalf("the default workspace image is missing and could not be built (Docker and debootstrap are needed): %v", err)
	}
	dir := t.TempDir()
	svc, err := New(Config{Addr: "127.0.0.1:0", StateDir: dir, InterruptGrace: 300 * time.Millisecond, AgentBinary: agentBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := client.New(svc.Addr(), svc.Token(), nil)
	t.Cleanup(func() {
		for _, w := range svc.mgr.List() {
			_ = svc.mgr.Delete(context.Background(), w.ID, false)
		}
		_ = svc.Shutdown(context.Background())
	})
	return svc, c
}

// agentBinary builds the patina binary (static) once per test process: the
// agent the service ships into workspaces.
func agentBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "patina-sidecar-test-")
		if err != nil {
			buildErr = err
			return
		}
		buildBin = filepath.Join(dir, "patina")
		cmd := exec.Command("go", "build", "-o", buildBin, "./cmd/patina")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./sidecar/cmd/patina: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// gitRepo makes a user repository with one commit.
func gitRepo(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "x")
	cmd.Dir = dir
	_ = exec.Command("git", "-C", dir, "add", "README").Run()
	cmd = exec.Command("git", "-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "readme")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("commit: %v %s", err, out)
	}
	return dir
}

func TestServiceSmoke(t *testing.T) {
	_, c := newService(t)
	ctx := context.Background()
	repo := gitRepo(t)
	ws, err := c.CreateWorkspace(ctx, client.CreateWorkspaceRequest{Name: "smoke", Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	if ws.Branch != "patina/smoke" || ws.Status != client.StatusRunning {
		t.Fatalf("bad workspace %+v", ws)
	}
	res, err := c.Exec(ctx, "smoke", "default", client.ExecRequest{Command: "cat README; cd /tmp; export X=1; git -C /workspace status --short; echo change >> /workspace/README"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "hello\n") {
		t.Fatalf("exec: %+v", res)
	}
	res, err = c.Exec(ctx, "smoke", "default", client.ExecRequest{Command: "echo $PWD $X"})
	if err != nil || res.Stdout != "/tmp 1\n" {
		t.Fatalf("state: %+v %v", res, err)
	}
	d, err := c.Diff(ctx, "smoke")
	if err != nil || len(d.Files) != 1 || d.Files[0].Path != "README" {
		t.Fatalf("diff: %+v %v", d, err)
	}
	if _, err := c.Exec(ctx, "nope", "default", client.ExecRequest{Command: "true"}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("exp not found, got %v", err)
	}
	lg, err := c.Log(ctx, "smoke")
	if err != nil || len(lg) < 2 {
		t.Fatalf("log: %+v %v", lg, err)
	}
	t.Logf("log: %+v", lg)
}

// A second sidecar on the same state directory refuses to start (it would
// adopt the first one's workspaces and sessions).
func TestSecondServiceRefused(t *testing.T) {
	svc, _ := newService(t)
	other, err := New(Config{Addr: "127.0.0.1:0", StateDir: svc.cfg.StateDir, AgentBinary: svc.cfg.AgentBinary})
	if err != nil {
		t.Fatal(err)
	}
	err = other.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "another patina serve") {
		t.Fatalf("exp a refusal, got %v", err)
	}
}
