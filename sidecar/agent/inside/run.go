package inside

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// RunConfig is `patina agent serve`.
type RunConfig struct {
	WorkspaceID string
	StateDir    string // default /.patina/state
	Workdir     string // default /workspace
	SeedDir     string // default SeedDir
	Socket      string // default SocketName
	// Takeover kills an agent that holds the socket already.
	Takeover bool
	// TCP, if set, is a TCP address the agent also listens on (":7071"):
	// how a sidecar reaches it across a cluster's overlay network, where
	// the workspace's network is its own (see container.Swarm).
	TCP string
	// TokenFile is read for the token when the environment has none (a
	// Swarm secret).
	TokenFile string
	Version   string
	// Git runs the workspace's repository (default WorkspaceGit).
	Git func(workdir, stateDir string, log *slog.Logger) Git
	// GitName and GitEmail are set as the container's system-wide git
	// identity unless it has one, so `git commit` works inside.
	GitName, GitEmail string
}

// Run is the agent process: it takes the token from the environment,
// listens on the abstract socket, opens the sessions and serves until
// SIGTERM or SIGINT. Its log is <state-dir>/agent.log, rotated at 1 MiB.
func Run(ctx context.Context, cfg RunConfig) error {
	if cfg.WorkspaceID == "" {
		return errors.New("agent: a workspace id is required")
	}
	if cfg.StateDir == "" {
		cfg.StateDir = "/.patina/state"
	}
	if cfg.Workdir == "" {
		cfg.Workdir = "/workspace"
	}
	if cfg.Socket == "" {
		cfg.Socket = wire.SocketName
	}
	// The shells inherit this process's environment, and root in the
	// workspace could read its /proc/<pid>/environ: not the token.
	token, scrubErr := takeSecretEnv(wire.TokenEnv, true)
	if token == "" && cfg.TokenFile != "" {
		b, err := os.ReadFile(cfg.TokenFile)
		if err != nil {
			return fmt.Errorf("agent: read the token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return fmt.Errorf("agent: %s is not set", wire.TokenEnv)
	}
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return err
	}
	logw := &rotatingLog{path: filepath.Join(cfg.StateDir, "agent.log"), max: 1 << 20}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if scrubErr != nil {
		log.Warn("the agent token may be readable in the container", "err", scrubErr)
	}
	ln, err := listen(ctx, cfg.Socket, cfg.Takeover, log)
	if err != nil {
		return err
	}
	defer ln.Close()
	// A workspace made from a saved workspace (a template of `patina ws
	// snapshot`) gets its files and sessions before the sessions open.
	if cfg.SeedDir == "" {
		cfg.SeedDir = SeedDir
	}
	if planted, err := plantSeed(cfg.SeedDir, cfg.Workdir, cfg.StateDir); err != nil {
		log.Warn("the template's files and sessions could not all be planted", "err", err)
	} else if planted {
		log.Info("planted the template's files and sessions", "seed", cfg.SeedDir)
	}
	scfg := ServerConfig{
		WorkspaceID: cfg.WorkspaceID,
		Token:       token,
		StateDir:    cfg.StateDir,
		Workdir:     cfg.Workdir,
		Version:     cfg.Version,
		Logger:      log,
	}
	if cfg.Git == nil {
		cfg.Git = WorkspaceGit
	}
	scfg.Git = cfg.Git(cfg.Workdir, cfg.StateDir, log)
	// The container's git identity is set meanwhile (a few git processes:
	// tens of ms that would delay every start); calls wait for it, so a
	// session's first `git commit` has it.
	setup := make(chan struct{})
	go func() {
		defer close(setup)
		if cfg.GitName != "" && cfg.GitEmail != "" {
			gitIdentity(ctx, cfg.GitName, cfg.GitEmail, log)
		}
	}()
	scfg.Setup = setup
	// An agent being taken over may hold the sessions' lock a moment more.
	var srv *Server
	deadline := time.Now().Add(takeoverWait)
	for {
		srv, err = NewServer(ctx, scfg)
		if err == nil || !cfg.Takeover || time.Now().After(deadline) || !errors.Is(err, session.ErrLocked) {
			break
		}
		time.Sleep(takeoverPoll)
	}
	if err != nil {
		return err
	}
	defer srv.Close()
	released := releaseExecutablePages()
	log.Info("agent serving", "released_startup_bytes", released, "workspace_id", cfg.WorkspaceID, "socket", cfg.Socket, "pid", os.Getpid(), "sessions", srv.hello.Sessions, "live", srv.hello.Live)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go srv.releaseWhenQuiet(ctx)
	if cfg.TCP != "" {
		// Taken over only after the socket: a hung agent that still holds
		// the port was killed above.
		var tln net.Listener
		for deadline := time.Now().Add(takeoverWait); ; time.Sleep(takeoverPoll) {
			if tln, err = net.Listen("tcp", cfg.TCP); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("agent: listen on %s: %w", cfg.TCP, err)
		}
		defer tln.Close()
		go func() { _ = srv.Serve(ctx, tln) }()
	}
	return srv.Serve(ctx, ln)
}

// gitIdentity gives the container a system-wide git identity unless it has
// one (best effort: an image without git has none).
func gitIdentity(ctx context.Context, name, email string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, gitIdentityTimeout)
	defer cancel()
	// One git process finds which keys are set (exit 1: none is); each
	// missing one takes another. Not at once: two writers of one config
	// file fail on its lock.
	out, _ := exec.CommandContext(ctx, "git", "config", "--system", "--get-regexp", `^user\.(name|email)$`).Output()
	have := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if key, _, ok := strings.Cut(line, " "); ok {
			have[strings.ToLower(key)] = true
		}
	}
	for _, kv := range [][2]string{{"user.name", name}, {"user.email", email}} {
		if have[kv[0]] {
			continue
		}
		if out, err := exec.CommandContext(ctx, "git", "config", "--system", kv[0], kv[1]).CombinedOutput(); err != nil {
			log.Debug("set the git identity", "key", kv[0], "err", err, "output", string(out))
		}
	}
}

// listen listens on the abstract socket; with takeover, a process holding
// it is killed first (it is in this container: its pid is ours to signal).
func listen(ctx context.Context, name string, takeover bool, log *slog.Logger) (net.Listener, error) {
	deadline := time.Now().Add(takeoverWait)
	for {
		ln, err := net.Listen("unix", name)
		if err == nil {
			return ln, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) || !takeover {
			return nil, fmt.Errorf("agent: listen on %s: %w (another agent runs: --takeover replaces it)", name, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("agent: listen on %s: still in use after killing its holder", name)
		}
		if pid := socketHolder(name); pid > 1 && pid != os.Getpid() {
			log.Warn("taking over the agent socket", "pid", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-time.After(takeoverPoll):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Relay copies in to the agent's socket and the socket to out until either
// side ends: `patina agent relay`, the exec transport's far end.
func Relay(socket string, in io.Reader, out io.Writer) error {
	if socket == "" {
		socket = wire.SocketName
	}
	c, err := net.Dial("unix", socket)
	if err != nil {
		return fmt.Errorf("connect to the agent: %w", err)
	}
	defer c.Close()
	go func() {
		_, _ = io.Copy(c, in)
		if uc, ok := c.(*net.UnixConn); ok {
			_ = uc.CloseWrite()
		}
	}()
	_, err = io.Copy(out, c)
	return err
}

// rotatingLog is a log file that moves to <path>.1 once it reaches max
// bytes: the agent's log never grows without bound.
type rotatingLog struct {
	mu   sync.Mutex
	path string
	max  int64
	f    *os.File
	size int64
}

func (l *rotatingLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil || l.size+int64(len(p)) > l.max {
		if l.f != nil {
			l.f.Close()
			_ = os.Rename(l.path, l.path+".1")
		}
		f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return len(p), nil // logging never fails the agent
		}
		st, _ := f.Stat()
		l.f, l.size = f, 0
		if st != nil {
			l.size = st.Size()
		}
	}
	n, _ := l.f.Write(p)
	l.size += int64(n)
	return len(p), nil
}

// Pause is a workspace container's main process, PID 1: it waits for
// SIGTERM or SIGINT and reaps the orphans reparented to it. As PID 1 it
// cannot be killed from inside the container (kill -9 -1 spares it), so
// the container outlives anything a workspace does to its processes,
// the agent included.
//
// PauseConfig is `patina agent pause`.
type PauseConfig struct {
	// Keep is a patina command (e.g. agent serve …) that Pause starts at
	// once and, unless Once, again after it exits (0.5 s later; 5 s if it
	// lived less than 10 s). That is how a workspace on a cluster gets its
	// agent, where no docker exec reaches its container.
	Keep []string
	// Once starts Keep once and never again: a workspace container on a
	// Docker engine gets its first agent that way, without the 0.1 s of a
	// docker exec, and the sidecar starts any later one (through docker
	// exec, as it always did), so that no two agents ever take turns
	// killing each other. shellInitDelay after it started it, the init
	// replaces itself with bash (execShellInit), which reaps and exits on
	// SIGTERM or SIGINT as the init did; where it cannot (no bash), it
	// stays.
	Once bool
}

// initNoise are the signals Pause takes and drops: those whose default in
// a Go program ends it, but for SIGTERM and SIGINT, which end the init.
var initNoise = []os.Signal{syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
	syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGABRT, syscall.SIGTRAP, syscall.SIGILL, syscall.SIGBUS,
	syscall.SIGFPE, syscall.SIGSEGV, syscall.SIGSYS, syscall.SIGVTALRM, syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGIO}

// Pause runs cfg (see PauseConfig).
func Pause(ctx context.Context, cfg PauseConfig) error {
	keep := cfg.Keep
	// The init holds the first agent's token (the container's
	// environment): it keeps it out of /proc/1/environ and hands it to
	// the agent alone. Not sealed: see takeSecretEnv.
	token, scrubErr := takeSecretEnv(wire.TokenEnv, false)
	if scrubErr != nil {
		fmt.Fprintf(os.Stderr, "patina agent pause: the agent token may be readable in the container: %v\n", scrubErr)
	}
	var env []string
	if token != "" {
		env = append(os.Environ(), wire.TokenEnv+"="+token)
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	// The kernel delivers a signal sent to PID 1 from inside its
	// namespace only if PID 1 handles it, and Go's runtime handles these
	// by ending the process (and so the container): taken here and
	// dropped. Not ignored (SIG_IGN), which the agent would inherit.
	noise := make(chan os.Signal, 16)
	signal.Notify(noise, initNoise...)
	defer signal.Stop(noise)
	kept := 0 // the kept command's pid
	var started time.Time
	var restart <-chan time.Time
	start := func() {
		exe, err := os.Executable()
		if err == nil {
			var p *os.Process
			p, err = os.StartProcess(exe, append([]string{exe}, keep...), &os.ProcAttr{
				Dir: "/", Env: env, Files: []*os.File{nil, os.Stdout, os.Stderr},
			})
			if err == nil {
				kept, started = p.Pid, time.Now()
				_ = p.Release() // reaped below, with the orphans
				return
			}
		}
		fmt.Fprintf(os.Stderr, "patina agent pause: start %v: %v\n", keep, err)
		if !cfg.Once {
			restart = time.After(restartSlow)
		}
	}
	if len(keep) > 0 {
		start()
	}
	// Nothing is left to start: a while after the agent's start (not
	// during it: the shell's own start, its pages read through the
	// container's file system, slowed the agent's), the init becomes a
	// shell that only reaps and waits, for a fraction of this process's
	// memory.
	var becomeShell <-chan time.Time
	if cfg.Once && kept != 0 {
		becomeShell = time.After(shellInitDelay)
	}
	for {
		select {
		case sig := <-sigs:
			if sig != syscall.SIGCHLD {
				return nil
			}
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
				if pid == kept {
					kept = 0
					if cfg.Once {
						continue
					}
					wait := restartQuick
					if time.Since(started) < shortLived {
						wait = restartSlow
					}
					restart = time.After(wait)
				}
			}
		case <-restart:
			restart = nil
			start()
		case <-noise:
		case <-becomeShell:
			becomeShell = nil
			signal.Stop(sigs)
			// A stop that came meanwhile is done, not lost in the exec
			// (SIGCHLDs: the shell's start reaps).
			for len(sigs) > 0 {
				if sig := <-sigs; sig != syscall.SIGCHLD {
					return nil
				}
			}
			if ctx.Err() != nil {
				return nil
			}
			err := execShellInit()
			signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
			fmt.Fprintf(os.Stderr, "patina agent pause: stays the init (%v)\n", err)
		case <-ctx.Done():
			return nil
		}
	}
}
