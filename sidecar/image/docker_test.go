package image

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// labelTest marks containers made by tests.
const labelTest = "dev.patina.test"

// dockerClient returns a client for the engine the environment names. It
// skips the test under -short (which promises tests that need no Docker,
// e.g. in a container without a socket) and fails it when the engine does
// not answer in a full run.
func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Docker engine (skipped with -short)")
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		t.Fatalf("Docker is not reachable (%v): these tests need a running engine; start dockerd (.ci/run does) or set DOCKER_HOST", err)
	}
	return cli
}

// TestBuildDefaultImage builds patina/base:bookworm from the host's mirror
// when it is absent (through EnsureBuilt, as other packages' tests do), then
// checks its configuration and runs a container from it.
func TestBuildDefaultImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image with debootstrap (~40 s)")
	}
	cli := dockerClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	var progress lineCounter
	logger := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	start := time.Now()
	if err := EnsureBuilt(ctx, logger, io.MultiWriter(&progress, testWriter{t})); err != nil {
		t.Fatalf("EnsureBuilt: %v", err)
	}
	if progress.n > 0 {
		t.Logf("built in %s (%d progress lines)", time.Since(start).Round(time.Millisecond), progress.n)
	} else {
		t.Logf("present already")
	}
	// A second call finds it.
	res, err := New(Config{}, cli, logger).Build(ctx, BuildRequest{IfMissing: true})
	if err != nil || res.Built {
		t.Fatalf("exp the image found present, got %+v, %v", res, err)
	}

	info, err := cli.ImageInspect(ctx, DefaultTag)
	if err != nil {
		t.Fatalf("inspect %s: %v", DefaultTag, err)
	}
	t.Logf("%s: %s, %.1f MB", DefaultTag, info.ID, float64(info.Size)/1e6)
	cfg := info.Config
	if cfg == nil {
		t.Fatalf("exp an image config, got none")
	}
	if exp := []string{"/bin/bash"}; !slices.Equal(cfg.Cmd, exp) {
		t.Errorf("exp Cmd %q, got %q", exp, cfg.Cmd)
	}
	for _, exp := range []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"} {
		if !slices.Contains(cfg.Env, exp) {
			t.Errorf("exp Env with %q, got %q", exp, cfg.Env)
		}
	}
	if cfg.WorkingDir != "/" {
		t.Errorf("exp WorkingDir /, got %q", cfg.WorkingDir)
	}
	for k, v := range map[string]string{LabelImage: "base", LabelSuite: DefaultSuite} {
		if cfg.Labels[k] != v {
			t.Errorf("exp label %s=%s, got %q", k, v, cfg.Labels)
		}
	}

	code, out := runContainer(t, cli, DefaultTag, "bash", "-c",
		"git --version && ps --version && test -d /etc/ssl/certs && test ! -e /var/cache/apt/archives/bash*.deb && test ! -e /etc/dpkg/dpkg.cfg.d/patina-unsafe-io && echo ok")
	if code != 0 {
		t.Fatalf("exp exit 0, got %d; output:\n%s", code, out)
	}
	for _, s := range []string{"git version", "procps-ng", "ok"} {
		if !strings.Contains(out, s) {
			t.Errorf("exp output containing %q, got:\n%s", s, out)
		}
	}
}

// runContainer runs cmd in a new container of img labelled as a test's,
// waits for it and returns its exit code and output. The container is
// removed whatever happens.
func runContainer(t *testing.T, cli *client.Client, img string, cmd ...string) (int64, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	created, err := cli.ContainerCreate(ctx, &container.Config{
		Image:  img,
		Cmd:    cmd,
		Labels: map[string]string{labelTest: "1"},
	}, nil, nil, nil, "")
	if err != nil {
		t.Fatalf("container create: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cli.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Errorf("container remove %s: %v", created.ID, err)
		}
	})
	waitC, errC := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("container start: %v", err)
	}
	var code int64
	select {
	case w := <-waitC:
		if w.Error != nil {
			t.Fatalf("container wait: %s", w.Error.Message)
		}
		code = w.StatusCode
	case err := <-errC:
		t.Fatalf("container wait: %v", err)
	}
	rc, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("container logs: %v", err)
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("container logs: %v", err)
	}
	return code, out.String()
}

// testWriter sends writes to t.Log, a line per write.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	if testing.Verbose() || os.Getenv("PATINA_TEST_PROGRESS") != "" {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// lineCounter counts the writes made to it.
type lineCounter struct{ n int }

func (c *lineCounter) Write(p []byte) (int, error) { c.n++; return len(p), nil }
