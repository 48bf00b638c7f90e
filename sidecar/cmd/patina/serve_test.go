package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServeSettings(t *testing.T) {
	home := t.TempDir()
	defaults := serveOptions{image: "img", logLevel: "info", logFormat: "text", shutdownTimeout: time.Second}
	tests := []struct {
		name                  string
		opts                  func(o *serveOptions)
		env                   map[string]string
		addr, stateDir, token string
	}{
		{"defaults", nil, nil, defaultAddr, filepath.Join(home, ".local", "state", "patina"), ""},
		{"env", nil, map[string]string{envAddr: "127.0.0.1:9", envToken: "t", envStateDir: "/s"}, "127.0.0.1:9", "/s", "t"},
		{"flags over env", func(o *serveOptions) { o.addr, o.token, o.stateDir = "127.0.0.1:0", "f", "/flag" },
			map[string]string{envAddr: "127.0.0.1:9", envToken: "t", envStateDir: "/s"}, "127.0.0.1:0", "/flag", "f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"HOME": home}
			for k, v := range tt.env {
				env[k] = v
			}
			o := defaults
			if tt.opts != nil {
				tt.opts(&o)
			}
			a := &app{getenv: func(k string) string { return env[k] }, stderr: &bytes.Buffer{}}
			s, err := a.serveSettings(o)
			if err != nil {
				t.Fatal(err)
			}
			if s.Addr != tt.addr || s.StateDir != tt.stateDir || s.Token != tt.token || s.Image != "img" || s.Logger == nil {
				t.Errorf("exp %s %s %q, got %+v", tt.addr, tt.stateDir, tt.token, s)
			}
		})
	}
}

func TestServeLogFormat(t *testing.T) {
	var b bytes.Buffer
	a := &app{getenv: func(string) string { return "" }, stderr: &b, stateDir: t.TempDir()}
	s, err := a.serveSettings(serveOptions{image: "i", logLevel: "warn", logFormat: "json", shutdownTimeout: time.Second, stateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s.Logger.Info("hidden")
	s.Logger.Warn("shown", "k", "v")
	if got := b.String(); !bytes.Contains(b.Bytes(), []byte(`"msg":"shown"`)) || bytes.Contains(b.Bytes(), []byte("hidden")) {
		t.Errorf("exp one JSON warning, got %q", got)
	}
}

func TestLoopback(t *testing.T) {
	for addr, exp := range map[string]bool{
		"127.0.0.1:7070": true, "localhost:1": true, "[::1]:80": true, "127.1.2.3:0": true,
		"0.0.0.0:7070": false, ":7070": false, "10.0.0.1:1": false, "example.com:80": false, "bad": false,
	} {
		if got := loopback(addr); got != exp {
			t.Errorf("loopback(%q): exp %v, got %v", addr, exp, got)
		}
	}
}

// The engine's and idle stop's flags reach the settings (--idle-stop was
// once dropped on the way).
func TestServeSettingsEngine(t *testing.T) {
	a := &app{getenv: func(string) string { return "" }, stderr: &bytes.Buffer{}, stateDir: t.TempDir()}
	o := serveOptions{image: "img", logLevel: "info", logFormat: "text", shutdownTimeout: time.Second, stateDir: t.TempDir(),
		idleStop: time.Minute, engine: "swarm", nodeBinary: "/opt/patina", nodeSocket: "/run/node.sock", unencrypted: true}
	s, err := a.serveSettings(o)
	if err != nil {
		t.Fatal(err)
	}
	if s.IdleStop != time.Minute || s.Engine != "swarm" || s.NodeBinary != "/opt/patina" || s.NodeSocket != "/run/node.sock" || !s.Unencrypted {
		t.Fatalf("settings lost flags: %+v", s)
	}
	for _, bad := range []serveOptions{{engine: "k8s"}, {engine: "swarm", nodeBinary: "rel/patina"}, {engine: "swarm", nodeBinary: "/opt/patina", nodeSocket: "run/node.sock"}} {
		b := o
		b.engine, b.nodeBinary, b.nodeSocket = bad.engine, bad.nodeBinary, bad.nodeSocket
		if _, err := a.serveSettings(b); err == nil {
			t.Errorf("exp %+v refused", bad)
		}
	}
}

func TestServeProcs(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 1, 4: 1, 7: 1, 8: 2, 16: 4, 64: 16} {
		if got := serveProcs(n); got != want {
			t.Errorf("serveProcs(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestServeSettingsRuntime(t *testing.T) {
	a := &app{getenv: func(string) string { return "" }, stderr: &bytes.Buffer{}, stateDir: t.TempDir()}
	base := serveOptions{image: "img", logLevel: "info", logFormat: "text", shutdownTimeout: time.Second, stateDir: t.TempDir(), diskMB: 2048, diskDir: "/d"}
	tests := []struct {
		runtime, transport, engine string
		expRuntime, expTransport   string // "" runtime: the engine's default
		refused                    bool
	}{
		{"", "auto", "docker", "", "auto", false},
		{"runc", "netns", "docker", "", "netns", false},
		{"runsc", "auto", "docker", "runsc", "exec", false},
		{"runsc", "exec", "docker", "runsc", "exec", false},
		{"runsc", "netns", "docker", "", "", true},
		{"runsc", "auto", "swarm", "", "", true},
		{"kata", "auto", "docker", "", "", true},
	}
	for _, tt := range tests {
		o := base
		o.runtime, o.transport, o.engine, o.nodeBinary = tt.runtime, tt.transport, tt.engine, "/opt/patina"
		s, err := a.serveSettings(o)
		if tt.refused {
			if err == nil {
				t.Errorf("exp --runtime %s --agent-transport %s --engine %s refused", tt.runtime, tt.transport, tt.engine)
			}
			continue
		}
		if err != nil {
			t.Errorf("--runtime %s --agent-transport %s: %v", tt.runtime, tt.transport, err)
			continue
		}
		if s.Runtime != tt.expRuntime || s.Transport != tt.expTransport {
			t.Errorf("--runtime %s --agent-transport %s: exp runtime %q transport %s, got %q %s", tt.runtime, tt.transport, tt.expRuntime, tt.expTransport, s.Runtime, s.Transport)
		}
		if s.DiskMB != 2048 || s.DiskDir != "/d" {
			t.Errorf("settings lost --disk/--disk-dir: %+v", s)
		}
	}
}

// --warm-template: NAME=N, each name once, a template's name, the whole
// pool within its bound with --warm's N.
func TestParseWarmTemplates(t *testing.T) {
	got, err := parseWarmTemplates([]string{"web=2", "dc-0123456789ab=1"}, 3)
	if err != nil || len(got) != 2 || got["web"] != 2 || got["dc-0123456789ab"] != 1 {
		t.Fatalf("exp web=2 dc-0123456789ab=1, got %v %v", got, err)
	}
	for _, bad := range [][]string{{"web"}, {"web=0"}, {"web=-1"}, {"web=x"}, {"=2"}, {"Bad Name=1"}, {"web=1", "web=2"}, {"web=200", "api=54"}} {
		if _, err := parseWarmTemplates(bad, 3); err == nil || !strings.Contains(err.Error(), "--warm") {
			t.Errorf("%q: exp a usage error naming the flag, got %v", bad, err)
		}
	}
}
