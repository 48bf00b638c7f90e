package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQuickStartAsUser is the Quick start as a person on a normal machine
// runs it: the sidecar started by root, then `patina ws create` and `patina
// exec` as an unprivileged user (nobody) who is a member of the sidecar's
// group, with no flags; a user outside the group is told why it cannot
// and what to do. The group is a gid no one has (no /etc/group change), the
// system directory a temporary one.
func TestQuickStartAsUser(t *testing.T) {
	skipUnlessRoot(t, "end-to-end test: needs Docker and root (skipped with -short)",
		"needs root: the sidecar runs as root, the CLI as another user (setpriv)")
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	const gid = "48213"
	base, err := os.MkdirTemp("", "patina-quickstart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	sys, home, bin := filepath.Join(base, "run"), filepath.Join(base, "home"), filepath.Join(base, "bin", "patina")
	for _, d := range []string{base, home, filepath.Dir(bin)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(home, 0o777); err != nil {
		t.Fatal(err)
	}

	s := startServeWith(t, []string{envSystemDir + "=" + sys}, "--group", gid)
	copyFile(t, s.bin, bin, 0o755)
	if fi, err := os.Stat(filepath.Join(sys, tokenFile)); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("exp the token published with mode 0640: %v %v", fi, err)
	}

	// As nobody: a user whose own state directory is empty.
	asUser := func(groups []string, args ...string) cliResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		pargs := []string{"--reuid=65534", "--regid=65534"}
		if len(groups) == 0 {
			pargs = append(pargs, "--clear-groups")
		} else {
			pargs = append(pargs, "--groups="+strings.Join(groups, ","))
		}
		cmd := exec.CommandContext(ctx, "setpriv", append(append(pargs, "--", bin), args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, envSystemDir + "=" + sys}
		return runCmd(t, cmd, "setpriv", args)
	}

	in := []string{gid}
	if r := asUser(in, "ws", "create", "--name", "quick"); r.code != 0 {
		t.Fatalf("ws create as a member of the group: exit %d\n%s%s\nsidecar:\n%s", r.code, r.stdout, r.stderr, s.logs.String())
	}
	if r := asUser(in, "exec", "quick", "--", "cd /tmp && export DEBUG=1"); r.code != 0 {
		t.Fatalf("exec: exit %d: %s", r.code, r.stderr)
	}
	if r := asUser(in, "exec", "quick", "--", "pwd; echo $DEBUG"); r.code != 0 || r.stdout != "/tmp\n1\n" {
		t.Fatalf("exec: exp the session's state, got exit %d %q %s", r.code, r.stdout, r.stderr)
	}

	r := asUser(nil, "ws", "ls")
	if r.code == 0 || !strings.Contains(r.stderr, "usermod -aG patina") || !strings.Contains(r.stderr, filepath.Join(sys, tokenFile)) {
		t.Fatalf("ws ls outside the group: exp a failure naming the token file and the group to join, got exit %d %q", r.code, r.stderr)
	}
	if r := asUser(in, "ws", "rm", "quick"); r.code != 0 {
		t.Fatalf("ws rm: exit %d: %s", r.code, r.stderr)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(sys, discoveryFile)); !os.IsNotExist(err) {
		t.Errorf("exp the address withdrawn when the sidecar stops, got %v", err)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestConnectionFromSystemDir checks how a client finds root's sidecar:
// through the system directory only when its own state directory was not
// chosen and shows no running sidecar, with the token published there, or
// a message saying which group to join.
func TestConnectionFromSystemDir(t *testing.T) {
	sys, home := t.TempDir(), t.TempDir()
	writeJSON := func(dir, addr string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, discoveryFile), []byte(`{"addr":"`+addr+`","pid":1}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeJSON(sys, "127.0.0.1:7171")
	env := map[string]string{"HOME": home, envSystemDir: sys}
	app := func(env map[string]string) *app {
		return &app{getenv: func(k string) string { return env[k] }}
	}

	_, err := app(env).resolveConnection()
	if !errors.Is(err, errSystemToken) || !strings.Contains(err.Error(), "groupadd patina") {
		t.Fatalf("no token published: exp a message naming the group to make, got %v", err)
	}
	if err := os.WriteFile(filepath.Join(sys, tokenFile), []byte("t1\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	c, err := app(env).resolveConnection()
	if err != nil || c.Addr != "127.0.0.1:7171" || c.Token != "t1" || c.TokenFrom != filepath.Join(sys, tokenFile) {
		t.Fatalf("exp root's sidecar and its token, got %+v, %v", c, err)
	}

	// A state directory named explicitly is the only one looked in.
	c, err = app(map[string]string{"HOME": home, envSystemDir: sys, envStateDir: t.TempDir()}).resolveConnection()
	if err != nil || c.Addr != defaultAddr || c.Token != "" {
		t.Fatalf("explicit state directory: exp the default address and no token, got %+v, %v", c, err)
	}
	// The user's own running sidecar wins.
	own := filepath.Join(home, ".local", "state", "patina")
	writeJSON(own, "127.0.0.1:7272")
	c, err = app(env).resolveConnection()
	if err != nil || c.Addr != "127.0.0.1:7272" || c.Token != "" {
		t.Fatalf("own sidecar: exp its address, got %+v, %v", c, err)
	}
}
