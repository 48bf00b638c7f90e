package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

func intp(i int) *int { return &i }

func TestWriteWorkspaces(t *testing.T) {
	wss := []client.Workspace{
		{ID: "b2", Name: "later", Status: "stopped", Error: "container died", Image: "img:2", CreatedAt: testNow.Add(-2 * time.Minute)},
		{ID: "a1", Name: "first", Status: "running", Image: "patina/base:bookworm", Branch: "patina/first", CreatedAt: testNow.Add(-3 * time.Hour)},
		{ID: "c3", Name: "resting", Status: "stopped", Error: "it was idle for 15m0s (idle_stop 15m0s); the next exec, attach or port connection starts it again", IdleStopped: true, Image: "img:2", CreatedAt: testNow.Add(-time.Minute)},
	}
	var b bytes.Buffer
	if err := writeWorkspaces(&b, wss, testNow); err != nil {
		t.Fatal(err)
	}
	exp := `NAME      ID   STATUS            IMAGE                  BRANCH         CREATED
first     a1   running           patina/base:bookworm   patina/first   3 hours ago
later     b2   stopped (error)   img:2                  -              2 minutes ago
resting   c3   stopped (idle)    img:2                  -              1 minute ago
`
	if got := b.String(); got != exp {
		t.Errorf("exp\n%s\ngot\n%s", exp, got)
	}
}

func TestWriteSessions(t *testing.T) {
	ss := []client.Session{
		{ID: "default", Status: "idle", Cwd: "/workspace", Commands: 3},
		{ID: "build", Status: "running", Cwd: "/workspace/src", Commands: 1, Running: "1"},
		{ID: "old", Status: "ended", EndReason: "command 2 ended the shell", Cwd: "/tmp", Commands: 2, ExitCode: intp(3)},
	}
	var b bytes.Buffer
	if err := writeSessions(&b, ss); err != nil {
		t.Fatal(err)
	}
	exp := `ID        STATUS                              CWD              COMMANDS   RUNNING
default   idle                                /workspace       3          -
build     running                             /workspace/src   1          1
old       ended (command 2 ended the shell)   /tmp             2          -
`
	if got := b.String(); got != exp {
		t.Errorf("exp\n%s\ngot\n%s", exp, got)
	}
}

func TestWriteHistory(t *testing.T) {
	start := testNow.Add(-time.Minute)
	end := func(d time.Duration) *time.Time { e := start.Add(d); return &e }
	cmds := []client.Command{
		{ID: "1", Command: "make test", State: "finished", StartedAt: start, EndedAt: end(1500 * time.Millisecond), ExitCode: intp(0), StdoutBytes: 2048, StderrBytes: 12},
		{ID: "2", Command: "cat <<EOF\nmulti\nline\nEOF", State: "finished", StartedAt: start, EndedAt: end(800 * time.Microsecond), ExitCode: intp(0)},
		{ID: "3", Command: "sleep 100", State: "finished", StartedAt: start, EndedAt: end(time.Second), ExitCode: intp(130), TimedOut: true},
		{ID: "4", Command: "exit 3", State: "finished", StartedAt: start, EndedAt: end(time.Millisecond), ExitCode: intp(3), SessionEnded: true},
		{ID: "5", Command: strings.Repeat("x", 80), State: "running", StartedAt: start},
		{ID: "6", Command: "lost one", State: "lost", StartedAt: start},
	}
	var b bytes.Buffer
	if err := writeHistory(&b, cmds, testNow); err != nil {
		t.Fatal(err)
	}
	exp := `ID   EXIT          DURATION   STDOUT    STDERR   COMMAND
1    0             1.5s       2.0 KiB   12 B     make test
2    0             800µs      0 B       0 B      cat <<EOF…
3    130 timeout   1s         0 B       0 B      sleep 100
4    3 ended       1ms        0 B       0 B      exit 3
5    running       1m0s       0 B       0 B      ` + strings.Repeat("x", 59) + `…
6    ? lost        -          0 B       0 B      lost one
`
	if got := b.String(); got != exp {
		t.Errorf("exp\n%s\ngot\n%s", exp, got)
	}
}

func TestWriteDiffStat(t *testing.T) {
	tests := []struct {
		name  string
		files []client.FileStat
		exp   string
	}{
		{"plural", []client.FileStat{
			{Path: "a.go", Status: "modified", Added: 3, Deleted: 2},
			{Path: "new.go", OldPath: "old.go", Status: "renamed"},
			{Path: "logo.png", Status: "added", Binary: true},
		}, `STATUS     PATH               LINES
modified   a.go               +3 -2
renamed    old.go => new.go   +0 -0
added      logo.png           binary
3 files changed, 3 insertions(+), 2 deletions(-)
`},
		{"singular", []client.FileStat{{Path: "README", Status: "modified", Added: 1, Deleted: 1}}, `STATUS     PATH     LINES
modified   README   +1 -1
1 file changed, 1 insertion(+), 1 deletion(-)
`},
		{"none", []client.FileStat{{Path: "README", Status: "modified"}}, `STATUS     PATH     LINES
modified   README   +0 -0
1 file changed, 0 insertions(+), 0 deletions(-)
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeDiffStat(&b, tt.files); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tt.exp {
				t.Errorf("exp\n%s\ngot\n%s", tt.exp, got)
			}
		})
	}
}

func TestWriteLog(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	entries := []client.LogEntry{
		{Time: at, Kind: "created", Message: "branch patina/x from main"},
		{Time: at, Kind: "command", ExitCode: intp(2), Message: "[default] make\tall"},
		{Line: "someone edited this note"},
	}
	var b bytes.Buffer
	if err := writeLog(&b, entries); err != nil {
		t.Fatal(err)
	}
	exp := `TIME                  KIND      EXIT   MESSAGE
2026-01-02 03:04:05   created   -      branch patina/x from main
2026-01-02 03:04:05   command   2      [default] make all
-                     -         -      someone edited this note
`
	if got := b.String(); got != exp {
		t.Errorf("exp\n%s\ngot\n%s", exp, got)
	}
}

func TestPrintWorkspace(t *testing.T) {
	ws := client.Workspace{
		ID: "abc", Name: "demo", Status: "running", Repo: "/src/app", Branch: "patina/demo",
		Base: "refs/heads/main", BaseCommit: "0123456789abcdef", Worktree: "/state/wt/demo",
		Image: "patina/base:bookworm", ContainerID: "0123456789abcdef0123", Network: client.NetworkPolicy{Mode: "none"},
		MemoryMB: 512, CPUs: 1.5, PidsLimit: 100, Env: map[string]string{"B": "2", "A": "1"}, SecretEnv: []string{"TOKEN"}, Secrets: []string{"GH", "NPM"},
		CreatedAt: testNow.Add(-time.Hour), IdleStop: "15m0s",
	}
	var b bytes.Buffer
	if err := printWorkspace(&b, ws, testNow); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, exp := range []string{
		"Name:      demo\n",
		"Base:      refs/heads/main 0123456789\n",
		"Container: 0123456789ab\n",
		"Limits:    512 MB memory, 1.5 CPUs, 100 processes\n",
		"Env:       A=1 B=2 TOKEN=(secret)\n",
		"Secrets:   GH NPM\n",
		"Idle stop: after 15m0s without activity\n",
		"(1 hour ago)\n",
	} {
		if !strings.Contains(got, exp) {
			t.Errorf("exp %q in\n%s", exp, got)
		}
	}
	b.Reset()
	printWorkspace(&b, client.Workspace{ID: "s", Name: "scratch", Status: "running"}, testNow)
	if got := b.String(); !strings.Contains(got, "scratch workspace") || strings.Contains(got, "Env:") {
		t.Errorf("exp a scratch workspace without env, got\n%s", got)
	}
}

func TestWriteJSONEmptyList(t *testing.T) {
	// ws ls --json with no workspaces prints [], never null.
	srv := newFakeSidecar(t)
	srv.workspaces = nil
	r := runCLI(t, srv.env(), "", "ws", "ls", "--json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("exp [] and exit 0, got %q, exit %d, stderr %q", r.stdout, r.code, r.stderr)
	}
}

func TestWsLsJSON(t *testing.T) {
	srv := newFakeSidecar(t)
	r := runCLI(t, srv.env(), "", "ws", "ls", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var got []client.Workspace
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if len(got) != 1 || got[0].Name != "demo" || got[0].ContainerID != "c0ffee" {
		t.Errorf("exp the fake's workspace, got %+v", got)
	}
}

func TestOneLine(t *testing.T) {
	tests := []struct{ in, exp string }{
		{"", ""},
		{"ls", "ls"},
		{"  ls  ", "ls"},
		{"a\nb", "a…"},
		{"a\r\nb", "a…"},
		{"abcdef", "abcd…"},
		{"abcde", "abcde"},
		{"äöüßéx", "äöüß…"},
	}
	for _, tt := range tests {
		if got := oneLine(tt.in, 5); got != tt.exp {
			t.Errorf("oneLine(%q): exp %q, got %q", tt.in, tt.exp, got)
		}
	}
}

func TestCell(t *testing.T) {
	tests := []struct{ in, exp string }{
		{"", "-"},
		{"a\tb\nc", "a b c"},
		{"plain", "plain"},
	}
	for _, tt := range tests {
		if got := cell(tt.in); got != tt.exp {
			t.Errorf("cell(%q): exp %q, got %q", tt.in, tt.exp, got)
		}
	}
}

func TestAgo(t *testing.T) {
	tests := []struct {
		d   time.Duration
		exp string
	}{
		{-time.Minute, "just now"},
		{30 * time.Second, "just now"},
		{time.Minute, "1 minute ago"},
		{59 * time.Minute, "59 minutes ago"},
		{time.Hour, "1 hour ago"},
		{47 * time.Hour, "47 hours ago"},
		{72 * time.Hour, "3 days ago"},
	}
	for _, tt := range tests {
		if got := ago(testNow, testNow.Add(-tt.d)); got != tt.exp {
			t.Errorf("ago(%s): exp %q, got %q", tt.d, tt.exp, got)
		}
	}
	if got := ago(testNow, time.Time{}); got != "" {
		t.Errorf("ago(zero): exp empty, got %q", got)
	}
}

func TestHumanBytes(t *testing.T) {
	tests := []struct {
		n   int64
		exp string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{10 * 1024, "10 KiB"}, {5 << 20, "5.0 MiB"}, {218 << 20, "218 MiB"}, {3 << 30, "3.0 GiB"},
	}
	for _, tt := range tests {
		if got := humanBytes(tt.n); got != tt.exp {
			t.Errorf("humanBytes(%d): exp %q, got %q", tt.n, tt.exp, got)
		}
	}
}

func TestParseEnv(t *testing.T) {
	env, err := parseEnv([]string{"A=1", "B=", "C=x=y", "A=2"})
	if err != nil {
		t.Fatal(err)
	}
	exp := map[string]string{"A": "2", "B": "", "C": "x=y"}
	if len(env) != len(exp) {
		t.Fatalf("exp %v, got %v", exp, env)
	}
	for k, v := range exp {
		if env[k] != v {
			t.Errorf("%s: exp %q, got %q", k, v, env[k])
		}
	}
	for _, bad := range []string{"A", "=1", "A B=1", "-X=1"} {
		if _, err := parseEnv([]string{bad}); err == nil {
			t.Errorf("parseEnv(%q): exp an error", bad)
		}
	}
}

func TestParseAuthor(t *testing.T) {
	tests := []struct {
		in, name, email string
		ok              bool
	}{
		{"Ada Lovelace <ada@example.com>", "Ada Lovelace", "ada@example.com", true},
		{"  Ada <ada@x>  ", "Ada", "ada@x", true},
		{"Ada", "", "", false},
		{"<ada@x>", "", "", false},
		{"Ada <>", "", "", false},
		{"Ada <a b@x>", "", "", false},
		{"Ada <ada@x", "", "", false},
	}
	for _, tt := range tests {
		name, email, err := parseAuthor(tt.in)
		if (err == nil) != tt.ok || name != tt.name || email != tt.email {
			t.Errorf("parseAuthor(%q): exp %q %q ok=%v, got %q %q %v", tt.in, tt.name, tt.email, tt.ok, name, email, err)
		}
	}
}

func TestWsCreateRequest(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	req, err := wsCreateOptions{name: "x", repo: "sub", base: "main", env: []string{"K=V"}, cpus: 1.5, network: "none"}.request()
	if err != nil {
		t.Fatal(err)
	}
	if req.Repo != dir+"/sub" {
		t.Errorf("exp the repo made absolute, %s/sub, got %s", dir, req.Repo)
	}
	if req.Name != "x" || req.Base != "main" || req.Env["K"] != "V" || req.CPUs != 1.5 || req.Network == nil || req.Network.Mode != "none" {
		t.Errorf("unexpected request %+v", req)
	}
	req, err = wsCreateOptions{}.request()
	if err != nil || req.Repo != "" || req.Env != nil {
		t.Errorf("exp a scratch request, got %+v, %v", req, err)
	}
}
