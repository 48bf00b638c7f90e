package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

func TestResolveConnection(t *testing.T) {
	state := t.TempDir()
	mustWrite(t, filepath.Join(state, discoveryFile), `{"addr":"127.0.0.1:4242","pid":7,"version":"x"}`)
	mustWrite(t, filepath.Join(state, tokenFile), "file-token\n")
	empty := t.TempDir()
	home := t.TempDir()

	tests := []struct {
		name                 string
		flags                [3]string // state-dir, addr, token
		env                  map[string]string
		dir, addr, addrFrom  string
		token, tokenFromBase string
	}{
		{"from the state dir", [3]string{state, "", ""}, nil,
			state, "127.0.0.1:4242", filepath.Join(state, discoveryFile), "file-token", tokenFile},
		{"state dir from env", [3]string{}, map[string]string{envStateDir: state},
			state, "127.0.0.1:4242", filepath.Join(state, discoveryFile), "file-token", tokenFile},
		{"flags win", [3]string{state, "10.0.0.1:1", "flag-token"}, map[string]string{envAddr: "e:1", envToken: "env-token"},
			state, "10.0.0.1:1", "--addr", "flag-token", "--token"},
		{"env over files", [3]string{state, "", ""}, map[string]string{envAddr: "e:1", envToken: "env-token"},
			state, "e:1", envAddr, "env-token", envToken},
		{"defaults", [3]string{empty, "", ""}, nil,
			empty, defaultAddr, "default", "", ""},
		{"XDG_STATE_HOME", [3]string{}, map[string]string{"XDG_STATE_HOME": empty},
			filepath.Join(empty, "patina"), defaultAddr, "default", "", ""},
		{"HOME", [3]string{}, map[string]string{"HOME": home},
			filepath.Join(home, ".local", "state", "patina"), defaultAddr, "default", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.env
			if env == nil {
				env = map[string]string{}
			}
			if env["HOME"] == "" {
				env["HOME"] = home
			}
			a := &app{getenv: func(k string) string { return env[k] }}
			a.stateDir, a.addr, a.token = tt.flags[0], tt.flags[1], tt.flags[2]
			c, err := a.resolveConnection()
			if err != nil {
				t.Fatal(err)
			}
			tokenFrom := tt.tokenFromBase
			if tokenFrom == tokenFile {
				tokenFrom = filepath.Join(tt.dir, tokenFile)
			}
			exp := connection{StateDir: tt.dir, Addr: tt.addr, AddrFrom: tt.addrFrom, Token: tt.token, TokenFrom: tokenFrom}
			if *c != exp {
				t.Errorf("exp %+v\ngot %+v", exp, *c)
			}
		})
	}
}

func TestResolveRelativeStateDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	a := &app{getenv: func(string) string { return "" }, stateDir: "rel"}
	got, err := a.resolveStateDir()
	if err != nil || got != filepath.Join(dir, "rel") {
		t.Errorf("exp %s, got %s (%v)", filepath.Join(dir, "rel"), got, err)
	}
}

func TestBadDiscoveryFile(t *testing.T) {
	state := t.TempDir()
	mustWrite(t, filepath.Join(state, discoveryFile), `{not json`)
	r := runCLI(t, map[string]string{envStateDir: state}, "", "ws", "ls")
	if r.code != exitFailure || !strings.Contains(r.stderr, discoveryFile) {
		t.Errorf("exp exit 1 naming %s, got %d: %q", discoveryFile, r.code, r.stderr)
	}
}

func TestUnreachable(t *testing.T) {
	state := t.TempDir()
	for _, tt := range []struct {
		name string
		env  map[string]string
		exp  []string
	}{
		{"refused", map[string]string{envStateDir: state, envAddr: "127.0.0.1:1"},
			[]string{"patina: cannot reach the sidecar at 127.0.0.1:1 (from PATINA_ADDR)", "connection refused", "patina serve", state}},
		{"stale sidecar.json", nil, []string{"cannot reach the sidecar at 127.0.0.1:1 (from " + filepath.Join(state, discoveryFile) + ")"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.env
			if env == nil {
				mustWrite(t, filepath.Join(state, discoveryFile), `{"addr":"127.0.0.1:1","pid":1}`)
				env = map[string]string{envStateDir: state}
			}
			for _, args := range [][]string{{"ws", "ls"}, {"exec", "w", "--", "true"}} {
				r := runCLI(t, env, "", args...)
				if r.code != exitFailure {
					t.Errorf("%v: exp exit 1, got %d", args, r.code)
				}
				for _, exp := range tt.exp {
					if !strings.Contains(r.stderr, exp) {
						t.Errorf("%v: exp stderr to contain %q, got %q", args, exp, r.stderr)
					}
				}
			}
		})
	}
}

func TestUnauthorized(t *testing.T) {
	f := newFakeSidecar(t)
	env := f.env()
	env[envToken] = "wrong"
	r := runCLI(t, env, "", "ws", "ls")
	if r.code != exitFailure || !strings.Contains(r.stderr, "could not prove it holds the token from PATINA_TOKEN, so patina did not send it") {
		t.Errorf("exp exit 1 and a token message, got %d: %q", r.code, r.stderr)
	}
	// No token anywhere.
	addr := strings.TrimPrefix(f.srv.URL, "http://")
	r = runCLI(t, map[string]string{envStateDir: t.TempDir(), envAddr: addr}, "", "ws", "ls")
	if r.code != exitFailure || !strings.Contains(r.stderr, "wants a token and patina has none") {
		t.Errorf("exp exit 1 and a no-token message, got %d: %q", r.code, r.stderr)
	}
}

func TestAPIError(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "ws", "show", "nope")
	if r.code != exitFailure || r.stderr != "patina: no workspace \"nope\"\n" {
		t.Errorf("exp exit 1 and the sidecar's message, got %d: %q", r.code, r.stderr)
	}
}

func TestRmSeveral(t *testing.T) {
	f := newFakeSidecar(t)
	r := runCLI(t, f.env(), "", "ws", "rm", "demo", "nope", "w1")
	if r.code != exitFailure {
		t.Errorf("exp exit 1 when one fails, got %d", r.code)
	}
	if r.stdout != "removed workspace demo\nremoved workspace w1\n" {
		t.Errorf("unexpected stdout %q", r.stdout)
	}
	if !strings.Contains(r.stderr, `patina: rm nope: no workspace "nope"`) {
		t.Errorf("unexpected stderr %q", r.stderr)
	}
}

// TestNoAnswer: a sidecar address that accepts connections but never
// answers fails a query within queryTimeout, saying so.
func TestNoAnswer(t *testing.T) {
	if d := newApp().queryTimeout; d <= 0 || d > 30*time.Second {
		t.Errorf("exp queries bounded by at most 30s, got %s", d)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	addr := ln.Addr().String()
	env := map[string]string{envStateDir: t.TempDir(), envAddr: addr}
	var out, errb bytes.Buffer
	a := &app{
		stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv:       func(k string) string { return env[k] },
		now:          time.Now,
		queryTimeout: 300 * time.Millisecond,
		apiTimeout:   time.Hour,
	}
	start := time.Now()
	code := run(context.Background(), []string{"ws", "ls"}, a)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("exp ws ls to give up after about 300ms, took %s", took)
	}
	exp := "patina: the sidecar at " + addr + " (from PATINA_ADDR) did not answer within 300ms.\n"
	if code != exitFailure || !strings.HasPrefix(errb.String(), exp) {
		t.Errorf("exp exit 1 and %q, got %d and %q", exp, code, errb.String())
	}
}

// A program listening where the state directory says the sidecar is (a
// dead sidecar's port, taken) never receives the token: the CLI asks for
// proof first, and says what it found.
func TestTokenNotSentToSquatter(t *testing.T) {
	var sawToken atomic.Bool
	squatter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			sawToken.Store(true)
		}
		if r.URL.Path == client.IdentifyPath {
			// A guess, and an echo of what a real sidecar would answer
			// for another token.
			writeFakeJSON(w, http.StatusOK, client.Identity{Proof: client.IdentityProof("not-the-token", r.URL.Query().Get("nonce"))})
			return
		}
		writeFakeJSON(w, http.StatusOK, []client.Workspace{})
	}))
	defer squatter.Close()
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, discoveryFile), fmt.Sprintf(`{"addr":%q,"pid":1}`, strings.TrimPrefix(squatter.URL, "http://")))
	mustWrite(t, filepath.Join(dir, tokenFile), "the-real-token\n")
	r := runCLI(t, map[string]string{envStateDir: dir}, "", "ws", "ls")
	if r.code != exitFailure || !strings.Contains(r.stderr, "could not prove it holds the token from "+filepath.Join(dir, tokenFile)+", so patina did not send it") || strings.Count(r.stderr, "patina:") != 1 || strings.Contains(r.stderr, `Get "`) {
		t.Fatalf("exp one clear refusal, got %d %q", r.code, r.stderr)
	}
	if sawToken.Load() {
		t.Fatal("the squatter received the token")
	}
	// The real fake sidecar proves it, and is used.
	f := newFakeSidecar(t)
	if r := runCLI(t, f.env(), "", "ws", "ls"); r.code != 0 {
		t.Fatalf("exp the sidecar that proves it to be used, got %d %q", r.code, r.stderr)
	}
}
