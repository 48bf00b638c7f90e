package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/patina-dev/patina/internal/syncbuf"
	pclient "github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/container"
	"github.com/patina-dev/patina/sidecar/image"
)

// Harness runs a real `patina serve` process against the real Docker
// engine, with its own state directory, and offers the actions a user
// takes. Start builds the binary once per test process.
type Harness struct {
	t        testing.TB
	Bin      string
	StateDir string
	Token    string
	Client   *pclient.Client

	// Env is added to the sidecar's environment (DOCKER_HOST for another
	// engine, say).
	Env []string
	// Args are more flags for patina serve (--engine swarm, say).
	Args []string

	// hc carries Client's traffic (and Raw's answers), checked against the
	// OpenAPI document.
	hc, rawHC *http.Client

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	logs   *syncbuf.Buffer
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// Binary builds sidecar/cmd/patina once per test process, into one shared
// place under the temporary directory (replaced atomically, so test
// processes running at once are safe), and returns its path.
//
// PATINA_E2E_BIN names another binary to run instead (an older build, to
// see a test fail on the code before a fix).
func Binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("PATINA_E2E_BIN"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		// One place per checkout: two clones testing at once must not run
		// each other's binary.
		sum := sha256.Sum256([]byte(RepoRoot()))
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("patina-e2e-bin-%d-%x", os.Getuid(), sum[:6]))
		if buildErr = os.MkdirAll(dir, 0o755); buildErr != nil {
			return
		}
		tmp, err := os.CreateTemp(dir, "build-*")
		if err != nil {
			buildErr = err
			return
		}
		tmp.Close()
		// Static: the same binary runs as the agent in any workspace image.
		cmd := exec.Command("go", "build", "-o", tmp.Name(), "./sidecar/cmd/patina")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp.Name())
			buildErr = fmt.Errorf("go build ./sidecar/cmd/patina: %v\n%s", err, out)
			return
		}
		buildBin = filepath.Join(dir, "patina")
		buildErr = os.Rename(tmp.Name(), buildBin)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// RequireDocker fails the test with a clear message when no Docker engine
// answers (CI always has one), skips under -short, and builds the default
// workspace image when it is absent.
func RequireDocker(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: needs Docker (skipped with -short)")
	}
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = c.Ping(ctx)
		cancel()
		c.Close()
	}
	if err != nil {
		t.Fatalf("end-to-end tests need a running Docker engine (start dockerd; .ci/run does): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := image.EnsureBuilt(ctx, nil, os.Stderr); err != nil {
		t.Fatalf("the default workspace image is missing and could not be built: %v", err)
	}
}

// Start starts a sidecar on a fresh state directory.
func Start(t testing.TB) *Harness { return StartWithEnv(t, nil) }

// StartWithEnv starts a sidecar with more environment (DOCKER_HOST=...).
func StartWithEnv(t testing.TB, env []string) *Harness {
	t.Helper()
	return StartIn(t, t.TempDir(), "e2e-"+fmt.Sprint(time.Now().UnixNano()), env)
}

// StartIn starts a sidecar on a given state directory and token.
func StartIn(t testing.TB, stateDir, token string, env []string) *Harness {
	t.Helper()
	return StartWith(t, stateDir, token, env, nil)
}

// StartWith starts a sidecar on a given state directory and token, with
// more environment and more flags.
func StartWith(t testing.TB, stateDir, token string, env, args []string) *Harness {
	t.Helper()
	return StartBinary(t, Binary(t), stateDir, token, env, args)
}

// StartBinary starts the sidecar bin (a copy of Binary with bytes of its
// own appended, say: it ships itself, into an agent volume of its own), on
// a given state directory and token, with more environment and flags.
func StartBinary(t testing.TB, bin, stateDir, token string, env, args []string) *Harness {
	t.Helper()
	RequireDocker(t)
	env = append(runscEnv(), env...) // under runsc, its engine (a test's own DOCKER_HOST wins)
	h := &Harness{t: t, Bin: bin, StateDir: stateDir, Token: token, Env: env, Args: args}
	// The clients first: cleanups run last-first, so theirs (which stop
	// failing t) run after h.cleanup, whose requests they check too.
	h.hc, h.rawHC = ValidatingClient(t, true), ValidatingClient(t, false)
	t.Cleanup(h.cleanup)
	h.Launch()
	return h
}

// Launch starts `patina serve` on port 0 (again, after Kill9) and waits
// until it answers.
func (h *Harness) Launch() {
	h.t.Helper()
	_ = os.Remove(filepath.Join(h.StateDir, "sidecar.json"))
	logs := &syncbuf.Buffer{}
	cmd := runscCommand(h.Bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--state-dir", h.StateDir, "--token", h.Token, "--log-level", "debug"}, h.Args...))
	cmd.Env = append(os.Environ(), h.Env...)
	cmd.Stdout = logs
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start patina serve: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	h.mu.Lock()
	h.cmd, h.logs, h.exited = cmd, logs, exited
	h.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			h.t.Fatalf("patina serve exited: %v\n%s", waitErr, h.Logs())
		default:
		}
		if addr := h.discoveredAddr(); addr != "" {
			c := pclient.New(addr, h.Token, h.hc)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := c.Health(ctx)
			cancel()
			if err == nil {
				h.Client = c
				return
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("patina serve did not answer within 60 s:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *Harness) discoveredAddr() string {
	b, err := os.ReadFile(filepath.Join(h.StateDir, "sidecar.json"))
	if err != nil {
		return ""
	}
	var d struct {
		Addr string `json:"addr"`
	}
	if json.Unmarshal(b, &d) != nil {
		return ""
	}
	return d.Addr
}

// Kill9 kills the sidecar with SIGKILL, as a crash would.
func (h *Harness) Kill9() {
	h.t.Helper()
	h.mu.Lock()
	cmd, exited := h.cmd, h.exited
	h.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		h.t.Fatalf("kill -9 sidecar: %v", err)
	}
	<-exited
}

// Logs returns what the sidecar logged so far.
func (h *Harness) Logs() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.logs.String()
}

func (h *Harness) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if h.Client != nil {
		if wss, err := h.Client.ListWorkspaces(ctx); err == nil {
			for _, w := range wss {
				_ = h.Client.DeleteWorkspace(ctx, w.ID, pclient.DeleteOptions{})
			}
		}
	}
	h.mu.Lock()
	cmd, exited := h.cmd, h.exited
	h.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	// Whatever the API could not delete: containers and volumes.
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	for _, kv := range h.Env {
		if host, ok := strings.CutPrefix(kv, "DOCKER_HOST="); ok {
			opts = append(opts, client.WithHost(host))
		}
	}
	if dc, err := client.NewClientWithOpts(opts...); err == nil {
		_ = container.Cleanup(ctx, dc, h.StateDir)
		dc.Close()
	}
	if h.t.Failed() {
		h.t.Logf("sidecar logs:\n%s", lastLines(h.Logs(), 80))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// CreateWorkspace creates a workspace or fails the test.
func (h *Harness) CreateWorkspace(req pclient.CreateWorkspaceRequest) pclient.Workspace {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := h.Client.CreateWorkspace(ctx, req)
	if err != nil {
		h.t.Fatalf("create workspace: %v", err)
	}
	return w
}

// CreateSession creates a session or fails the test.
func (h *Harness) CreateSession(ws string, req pclient.CreateSessionRequest) pclient.Session {
	h.t.Helper()
	s, err := h.Client.CreateSession(context.Background(), ws, req)
	if err != nil {
		h.t.Fatalf("create session: %v", err)
	}
	return s
}

// Exec runs a command or fails the test on an API error.
func (h *Harness) Exec(ws, sid, command string) pclient.ExecResult {
	h.t.Helper()
	return h.ExecReq(ws, sid, pclient.ExecRequest{Command: command})
}

// ExecReq runs a request or fails the test on an API error.
func (h *Harness) ExecReq(ws, sid string, req pclient.ExecRequest) pclient.ExecResult {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := h.Client.Exec(ctx, ws, sid, req)
	if err != nil {
		h.t.Fatalf("exec %q: %v", req.Command, err)
	}
	return res
}

// Out runs a command, requires exit 0 and returns its stdout.
func (h *Harness) Out(ws, sid, command string) string {
	h.t.Helper()
	res := h.Exec(ws, sid, command)
	if res.ExitCode != 0 {
		h.t.Fatalf("exec %q: exit %d, stderr %q", command, res.ExitCode, res.Stderr)
	}
	return res.Stdout
}

// Raw sends a request with the harness's token (or none when token is
// "-") and returns the status and body.
func (h *Harness) Raw(method, path, token string, body []byte, hdr map[string]string) (int, []byte) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.Client.Addr()+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	switch token {
	case "":
		req.Header.Set("Authorization", "Bearer "+h.Token)
	case "-":
	default:
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := h.rawHC.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

// GitRepo creates a user repository with a commit on main.
func GitRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", "-A")
	git("commit", "-q", "--allow-empty", "-m", "initial")
	return dir
}

// WaitFor polls cond until it holds or timeout passes.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// IsCode reports whether err is an API error with that code.
func IsCode(err error, code string) bool {
	var ae *pclient.APIError
	return errors.As(err, &ae) && ae.Code == code
}
