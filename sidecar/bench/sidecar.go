package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	pcontainer "github.com/patina-dev/patina/sidecar/container"
)

// sidecarProc is a `patina serve` child process.
type sidecarProc struct {
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited
	waitErr  error
	logPath  string
	stateDir string
	Addr     string
	Token    string
	Version  string
}

// startSidecar runs `bin serve` on a free loopback port with stateDir and a
// generated token, and waits until it has written its sidecar.json.
// defaultStartTimeout bounds a sidecar's start: longer than its own bounds
// at start (its engine's first answer, 30 s; opening the disk pool, 1
// min), which a loaded host can take (a runsc sidecar did not listen
// within 30 s while CI built an image beside it).
const defaultStartTimeout = 2 * time.Minute

func startSidecar(ctx context.Context, bin, stateDir, logPath, img string, timeout time.Duration, extra ...string) (*sidecarProc, error) {
	return startSidecarEnv(ctx, nil, bin, stateDir, logPath, img, timeout, extra...)
}

// defaultAgent is the agent a sidecar started from bin ships when it is
// given none (serve's own default): patina-agent beside bin when it speaks
// this sidecar's protocol, else bin itself (its release is not compared:
// the bench names the agent it chose).
func defaultAgent(ctx context.Context, bin string) string {
	if slim, err := pcontainer.SlimAgentBeside(ctx, bin, ""); err == nil {
		return slim
	}
	return bin
}

// startSidecarEnv is startSidecar with more environment (DOCKER_HOST).
func startSidecarEnv(ctx context.Context, env []string, bin, stateDir, logPath, img string, timeout time.Duration, extra ...string) (*sidecarProc, error) {
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p := &sidecarProc{
		done:     make(chan struct{}),
		logPath:  logPath,
		stateDir: stateDir,
		Token:    hex.EncodeToString(tok),
	}
	// The whole binary in the workspaces unless the phase names another:
	// the port checks run its `agent test-server` there, and a patina-agent
	// beside bin would otherwise be serve's default.
	if !slices.Contains(extra, "--agent-binary") {
		extra = append(extra, "--agent-binary", bin)
	}
	p.cmd = exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--state-dir", stateDir,
		"--token", p.Token, "--image", img, "--log-level", "warn"}, extra...)...)
	p.cmd.Env = append(cleanEnv(os.Environ()), env...)
	p.cmd.Stdout = logf
	p.cmd.Stderr = logf
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", bin, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		d, err := readDiscovery(stateDir)
		if err == nil {
			p.Addr, p.Version = d.Addr, d.Version
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("the sidecar exited before it listened (%v):\n%s", p.waitErr, p.logTail())
		case <-deadline.C:
			p.stop()
			return nil, fmt.Errorf("the sidecar did not write %s within %s:\n%s",
				filepath.Join(stateDir, "sidecar.json"), timeout, p.logTail())
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// cleanEnv drops PATINA_* variables, so that the child takes its settings
// from its flags alone.
func cleanEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PATINA_") {
			out = append(out, kv)
		}
	}
	return out
}

type discovery struct {
	Addr    string `json:"addr"`
	PID     int    `json:"pid"`
	Version string `json:"version"`
}

func readDiscovery(stateDir string) (discovery, error) {
	var d discovery
	b, err := os.ReadFile(filepath.Join(stateDir, "sidecar.json"))
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, err // written but not complete yet, or not ours
	}
	if d.Addr == "" {
		return d, errors.New("sidecar.json has no addr")
	}
	return d, nil
}

// stop ends the process: SIGTERM, then SIGKILL after 10 s.
func (p *sidecarProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// rss returns the process's resident set size, from /proc/<pid>/status.
func (p *sidecarProc) rss() (int64, error) {
	return readRSS(p.cmd.Process.Pid)
}

func readRSS(pid int) (int64, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read RSS: %w", err)
	}
	return parseVmRSS(b)
}

// parseVmRSS finds "VmRSS:   12345 kB" in a /proc/<pid>/status.
func parseVmRSS(status []byte) (int64, error) {
	return parseKB(status, "VmRSS", "/proc/<pid>/status")
}

// parseKB finds "field:   12345 kB" in text read from source (a /proc
// file) and returns it in bytes.
func parseKB(text []byte, field, source string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected %s line %q", field, sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected %s line %q", field, sc.Text())
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no %s in %s", field, source)
}

// logTail returns the end of the sidecar's log, for error messages.
func (p *sidecarProc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	const max = 4096
	if len(b) > max {
		b = b[len(b)-max:]
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(the sidecar logged nothing)"
	}
	return s
}
