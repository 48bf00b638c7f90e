package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/patina-dev/patina/sidecar/client"
)

// Environment variables that stand in for the global flags.
const (
	envStateDir = "PATINA_STATE_DIR"
	envAddr     = "PATINA_ADDR"
	envToken    = "PATINA_TOKEN"
)

// defaultAddr is where the sidecar listens unless told otherwise.
const defaultAddr = "127.0.0.1:7070"

// Files the sidecar writes into its state directory.
const (
	tokenFile     = "token"        // the API token, mode 0600
	discoveryFile = "sidecar.json" // a running sidecar's address and pid
)

// discovery is the content of <state-dir>/sidecar.json, which a running
// sidecar writes on start and removes on shutdown.
type discovery struct {
	Addr    string `json:"addr"`
	PID     int    `json:"pid"`
	Version string `json:"version"`
}

// readDiscovery reads dir's sidecar.json; ok is false when there is none.
func readDiscovery(dir string) (d discovery, ok bool, err error) {
	path := filepath.Join(dir, discoveryFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return d, false, nil
	}
	if err != nil {
		return d, false, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, false, fmt.Errorf("%s: %w", path, err)
	}
	if d.Addr == "" {
		return d, false, fmt.Errorf("%s: no addr", path)
	}
	return d, true, nil
}

// connection is how a client command reaches the sidecar, and where each
// setting came from (for error messages).
type connection struct {
	StateDir  string
	Addr      string
	AddrFrom  string // "--addr", "PATINA_ADDR", the sidecar.json path, or "default"
	Token     string
	TokenFrom string // "--token", "PATINA_TOKEN", the token file path, or "" (none)
}

// defaultStateDir is $XDG_STATE_HOME/patina, else ~/.local/state/patina
// (the worktree package's default too).
func defaultStateDir(getenv func(string) string) (string, error) {
	if base := getenv("XDG_STATE_HOME"); base != "" {
		return filepath.Join(base, "patina"), nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("no state directory: set --state-dir or %s (%v)", envStateDir, err)
		}
	}
	return filepath.Join(home, ".local", "state", "patina"), nil
}

// resolveStateDir returns the state directory, absolute: --state-dir, else
// PATINA_STATE_DIR, else the default.
func (a *app) resolveStateDir() (string, error) {
	dir := firstNonEmpty(a.stateDir, a.getenv(envStateDir))
	if dir == "" {
		var err error
		if dir, err = defaultStateDir(a.getenv); err != nil {
			return "", err
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("state directory %s: %w", dir, err)
	}
	return abs, nil
}

// resolveConnection works out the sidecar's address and token from the
// global flags, the environment and the state directory.
func (a *app) resolveConnection() (*connection, error) {
	dir, err := a.resolveStateDir()
	if err != nil {
		return nil, err
	}
	c := &connection{StateDir: dir}
	// Root's sidecar, found through the system directory: only when the
	// state directory was not chosen and shows no running sidecar.
	explicit := a.stateDir != "" || a.getenv(envStateDir) != ""
	system := false
	switch {
	case a.addr != "":
		c.Addr, c.AddrFrom = a.addr, "--addr"
	case a.getenv(envAddr) != "":
		c.Addr, c.AddrFrom = a.getenv(envAddr), envAddr
	default:
		d, ok, err := readDiscovery(dir)
		if err != nil {
			return nil, err
		}
		if ok {
			c.Addr, c.AddrFrom = d.Addr, filepath.Join(dir, discoveryFile)
			break
		}
		if !explicit {
			if d, ok, _ := readDiscovery(a.systemDir()); ok {
				c.Addr, c.AddrFrom = d.Addr, filepath.Join(a.systemDir(), discoveryFile)
				system = true
				break
			}
		}
		c.Addr, c.AddrFrom = defaultAddr, "default"
	}
	switch {
	case a.token != "":
		c.Token, c.TokenFrom = a.token, "--token"
	case a.getenv(envToken) != "":
		c.Token, c.TokenFrom = a.getenv(envToken), envToken
	case system:
		path := filepath.Join(a.systemDir(), tokenFile)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, systemTokenError(path, err)
		}
		c.Token, c.TokenFrom = strings.TrimSpace(string(b)), path
	default:
		path := filepath.Join(dir, tokenFile)
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			c.Token, c.TokenFrom = strings.TrimSpace(string(b)), path
		case errors.Is(err, os.ErrNotExist):
			// No token: the sidecar will answer 401, and the message says
			// where patina looked.
		default:
			return nil, fmt.Errorf("read token: %w", err)
		}
	}
	return c, nil
}

// dialTimeout bounds connecting to the sidecar, so that an address nobody
// answers fails fast instead of hanging.
const dialTimeout = 5 * time.Second

// client resolves the connection and returns an API client for it.
func (a *app) client() (*client.Client, error) {
	c, err := a.resolveConnection()
	if err != nil {
		return nil, err
	}
	a.conn = c
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: localKeepAlive}
	// The token goes only to a server that proves it holds it: after a
	// sidecar dies, another program may listen on its port.
	hc := &http.Client{Transport: client.Verifying(&http.Transport{
		Proxy:               nil, // the sidecar is local: never go through a proxy
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     localIdleConn,
	}, c.Token)}
	return client.New(c.Addr, c.Token, hc), nil
}

// callContext bounds one API call by d (zero: no bound).
func callContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// apiContext bounds an API call that may take long (anything but exec and
// the read-only queries).
func (a *app) apiContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return callContext(ctx, a.apiTimeout)
}

// noAnswer marks err as the sidecar not answering within d when the bound
// of ctx (made by callContext) is what ended the call.
func noAnswer(ctx context.Context, d time.Duration, err error) error {
	if err != nil && errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &noAnswerError{after: d, err: err}
	}
	return err
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// withClient runs fn with a client of the sidecar and a context bounded by
// the timeout of calls that may take long.
func (a *app) withClient(cmd *cobra.Command, fn func(context.Context, *client.Client) error) error {
	return a.withClientWithin(cmd, a.apiTimeout, fn)
}

// withClientWithin runs fn with a client of the sidecar and a context
// bounded by d.
func (a *app) withClientWithin(cmd *cobra.Command, d time.Duration, fn func(context.Context, *client.Client) error) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	ctx, cancel := callContext(cmd.Context(), d)
	defer cancel()
	return noAnswer(ctx, d, fn(ctx, c))
}

// query fetches something from the sidecar, which should answer at once
// (within queryTimeout), and prints it: as JSON with --json, else with
// text. Most read-only commands are this.
func query[T any](a *app, cmd *cobra.Command, asJSON bool, fetch func(context.Context, *client.Client) (T, error), text func(io.Writer, T) error) error {
	return a.withClientWithin(cmd, a.queryTimeout, func(ctx context.Context, c *client.Client) error {
		v, err := fetch(ctx, c)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(a.stdout, v)
		}
		return text(a.stdout, v)
	})
}
