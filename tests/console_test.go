package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/patina-dev/patina/sidecar/client"
)

// browser starts a headless Chromium (Debian's chromium) for t, driven
// through the DevTools protocol by chromedp.
func browser(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Chromium and Docker (not with -short)")
	}
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("these tests need Debian's chromium (apt-get install chromium): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900), chromedp.Flag("disable-gpu", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// artifacts is where screenshots go: $PATINA_TEST_ARTIFACTS, else a
// temporary directory (logged).
func artifacts(t *testing.T) string {
	dir := os.Getenv("PATINA_TEST_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// do runs browser actions with a deadline.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(cctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitJS waits until the page's expression is true (evaluated every
// 100 ms from here: chromedp's in-page polling missed changes headless).
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ok, err := chromedp.Run(cctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("wait for %s: not true after 90 s (%v)\npage: %s", what, err, lastLines(body, 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func jsText(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

// signIn opens the console and signs in with tok.
func signIn(t *testing.T, ctx context.Context, base, tok string) {
	t.Helper()
	do(t, ctx, "open the console", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#signin-token")))
	do(t, ctx, "sign in", chromedp.SendKeys(chromedp.CSS("#signin-token"), tok), chromedp.Click(chromedp.CSS("#signin-form button")))
}

// TestConsole: a person signs in to the web console with the token, sees
// a workspace created through the API appear, watches an exec's output
// stream in, reviews the diff, commits and merges exactly that commit into
// the user's repository, types into the session's terminal (and the
// session keeps it for the API), and opens a forwarded port's preview.
func TestConsole(t *testing.T) {
	ctx := browser(t)
	h := Start(t)
	dir := artifacts(t)
	base := h.Client.Addr()
	repo := GitRepo(t, map[string]string{"README.md": "hello\n"})

	signIn(t, ctx, base, h.Token)
	waitJS(t, ctx, "the workspaces table", `!!document.querySelector("#ws-rows")`)
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "agent1", Repo: repo})
	waitJS(t, ctx, "agent1 to appear, running", `(() => { const r = document.querySelector('tr[data-ws="agent1"] [data-test=state]'); return r && r.textContent.startsWith("running"); })()`)
	screenshot(t, ctx, dir, "workspaces")

	// An exec through the API streams into the open workspace view.
	do(t, ctx, "open the workspace", chromedp.Navigate(base+"/#/ws/agent1"))
	waitJS(t, ctx, "the sessions view", `!!document.querySelector("#sessions")`)
	h.Exec("agent1", "default", "true") // the session exists
	if st, b := h.Raw("POST", "/v1/workspaces/agent1/sessions/default/exec", "", []byte(`{"command": "for i in 1 2 3 4 5 6; do echo tick$i; sleep 1; done", "async": true}`), nil); st != 202 {
		t.Fatalf("async exec: exp 202, got %d %s", st, b)
	}
	waitJS(t, ctx, "tick2 streaming while the command runs", `[...document.querySelectorAll("[data-test=live-output]")].some(p => p.textContent.includes("tick2") && !p.textContent.includes("tick6"))`)
	screenshot(t, ctx, dir, "workspace")
	waitJS(t, ctx, "the whole output", `[...document.querySelectorAll("[data-test=live-output]")].some(p => p.textContent.includes("tick6"))`)

	// Review: the diff, a commit with a message, merge exactly that commit.
	WaitFor(t, "the agent's edit (once the command above has ended)", 30*time.Second, func() bool {
		res, err := h.Client.Exec(context.Background(), "agent1", "default", client.ExecRequest{Command: "cd /workspace && echo 'from the agent' > agent.txt && printf 'hello\\nmore\\n' > README.md"})
		return err == nil && res.ExitCode == 0
	})
	do(t, ctx, "open the review", chromedp.Navigate(base+"/#/ws/agent1/review"))
	waitJS(t, ctx, "the diff's files", `!!document.querySelector('[data-file*="agent.txt"]') && !!document.querySelector('[data-file*="README.md"]')`)
	do(t, ctx, "commit", chromedp.SendKeys(chromedp.CSS("#commit-message"), "Work of agent1"), chromedp.Click(chromedp.CSS("#commit")))
	waitJS(t, ctx, "the merge button", `!!document.querySelector("#merge")`)
	shown := strings.TrimSpace(jsText(t, ctx, `document.querySelector("#diff-commit").textContent`))
	screenshot(t, ctx, dir, "review")
	do(t, ctx, "merge", chromedp.Click(chromedp.CSS("#merge")))
	waitJS(t, ctx, "the merge's result", `!!document.querySelector("[data-test=merged]")`)
	head := gitLine(t, repo, "rev-parse", "HEAD")
	if head != shown {
		// A merge commit: its second parent is exactly what was shown.
		if p2 := gitLine(t, repo, "rev-parse", "HEAD^2"); p2 != shown {
			t.Fatalf("the repository's HEAD %s (second parent %s) is not the commit shown %s", head, p2, shown)
		}
	}
	if got := gitLine(t, repo, "show", shown+":agent.txt"); got != "from the agent" {
		t.Fatalf("the merged commit's agent.txt: exp %q, got %q", "from the agent", got)
	}
	if msg := gitLine(t, repo, "log", "-1", "--format=%s", shown); msg != "Work of agent1" {
		t.Fatalf("the commit's message: exp %q, got %q", "Work of agent1", msg)
	}

	// The terminal: typed state stays in the session for the API.
	do(t, ctx, "open the terminal", chromedp.Navigate(base+"/#/ws/agent1/terminal/default"))
	waitJS(t, ctx, "the terminal attached", `document.querySelector("#term") && document.querySelector("#term").dataset.attached === "1"`)
	do(t, ctx, "type in the terminal", chromedp.SendKeys(chromedp.CSS(".xterm-helper-textarea"), "cd /tmp && export FROM_CONSOLE=typed-in-browser\r"))
	waitJS(t, ctx, "the command echoed", `document.querySelector(".xterm-rows") ? document.querySelector(".xterm-rows").textContent.includes("FROM_CONSOLE") : true`)
	screenshot(t, ctx, dir, "terminal")
	do(t, ctx, "close the terminal", chromedp.Click(chromedp.CSS("#term-close")))
	var out string
	WaitFor(t, "the session back for the API, with the typed state", 30*time.Second, func() bool {
		res, err := h.Client.Exec(context.Background(), "agent1", "default", client.ExecRequest{Command: "echo $PWD $FROM_CONSOLE"})
		if err != nil {
			return false
		}
		out = strings.TrimSpace(res.Stdout)
		return out == "/tmp typed-in-browser"
	})

	// Ports: forward one from the console, open its preview.
	h.Out("agent1", "default", "nohup /.patina/bin/patina agent test-server --listen 127.0.0.1:3000 >/tmp/ts.log 2>&1 &")
	do(t, ctx, "open the ports", chromedp.Navigate(base+"/#/ws/agent1/ports"))
	waitJS(t, ctx, "the ports form", `!!document.querySelector("#forward-port")`)
	WaitFor(t, "port 3000 forwarded from the console", 30*time.Second, func() bool {
		_ = chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#forward-port"), "3000"),
			chromedp.Evaluate[chromedp.Void](`document.querySelector("#forward-port").form.requestSubmit(); 0`))
		ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('a[data-port="3000"]')`))
		return ok
	})
	screenshot(t, ctx, dir, "ports")
	do(t, ctx, "open the preview", chromedp.Navigate(base+"/preview/agent1/3000/hello"))
	waitJS(t, ctx, "the workspace's server through the preview", `document.body.innerText.startsWith("hello from ")`)
	screenshot(t, ctx, dir, "preview")
}

func gitLine(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// TestConsoleSignInRefused: a wrong or missing token, a used code, or a
// page of another origin sees nothing.
func TestConsoleSignInRefused(t *testing.T) {
	ctx := browser(t)
	h := Start(t)
	base := h.Client.Addr()
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "secret-work"})

	signIn(t, ctx, base, "wrong-"+h.Token)
	waitJS(t, ctx, "the refusal", `document.querySelector("#signin-error").textContent.includes("wrong token")`)
	if jsText(t, ctx, `document.body.innerText`) != "" && strings.Contains(jsText(t, ctx, `document.body.innerText`), "secret-work") {
		t.Fatal("a wrong token sees the workspaces")
	}
	if k := jsText(t, ctx, `sessionStorage.getItem("patina.key") || ""`); k != "" {
		t.Fatalf("a wrong token got a key: %q", k)
	}

	post := func(body, origin string) (int, string) {
		req, _ := http.NewRequest("POST", base+"/console/signin", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	tok, _ := json.Marshal(map[string]string{"token": h.Token})
	for _, c := range []struct {
		name, body, origin string
		exp                int
	}{
		{"no origin", string(tok), "", 403},
		{"another origin", string(tok), "http://evil.example", 403},
		{"wrong token", `{"token":"nope"}`, base, 401},
		{"empty", `{}`, base, 401},
		{"unknown code", `{"code":"00112233"}`, base, 401},
	} {
		if code, body := post(c.body, c.origin); code != c.exp || strings.Contains(body, "key") {
			t.Errorf("%s: exp %d and no key, got %d %s", c.name, c.exp, code, body)
		}
	}
	// A code works once.
	code, err := h.Client.ConsoleCode(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"code":%q}`, code.Code)
	if st, b := post(body, base); st != 200 || !strings.Contains(b, `"key"`) {
		t.Fatalf("a fresh code: exp 200 with a key, got %d %s", st, b)
	}
	if st, _ := post(body, base); st != 401 {
		t.Fatalf("a used code: exp 401, got %d", st)
	}
	// Nothing without a bearer: the API, its events, metrics, previews.
	for _, p := range []string{"/v1/workspaces", "/v1/events", "/metrics", "/preview/secret-work/3000/"} {
		st, b := h.Raw("GET", p, "wrong", nil, nil)
		if st != 401 || strings.Contains(string(b), "secret-work\"") {
			t.Errorf("GET %s with a wrong token: exp 401, got %d %s", p, st, b)
		}
	}
	// The one-time link signs the browser in, and shows the workspace.
	code, err = h.Client.ConsoleCode(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "open the one-time link", chromedp.Navigate(base+code.Path))
	waitJS(t, ctx, "the workspace after a sign-in by code", `!!document.querySelector('tr[data-ws="secret-work"]')`)
	if h := jsText(t, ctx, `location.hash`); strings.Contains(h, code.Code) {
		t.Fatalf("the code stays in the address bar: %s", h)
	}
}

// TestHostilePreview: a workspace's preview reaches only that workspace's
// forwarded port, never gets the console's or the API's credentials, sets
// no cookie on the console's origin, and needs a sign-in.
func TestHostilePreview(t *testing.T) {
	h := startWithWorkspaces(t, "evil", "victim")
	evilFwd := startTestServer(t, h, "evil", "127.0.0.1:3000", 3000)
	startTestServer(t, h, "victim", "127.0.0.1:3001", 3001)
	victimHost := "hello from " + strings.TrimSpace(h.Out("victim", "default", "hostname"))

	// Without a sign-in: 401, and the workspace's server is not reached.
	st, b := h.Raw("GET", "/preview/evil/3000/hello", "nope", nil, nil)
	if st != 401 || strings.Contains(string(b), "hello from") {
		t.Fatalf("preview without a sign-in: exp 401, got %d %s", st, b)
	}
	// With the token: the workspace's server sees neither it nor cookies.
	st, b = h.Raw("GET", "/preview/evil/3000/headers", "", nil, map[string]string{"Cookie": "patina_preview=abc; other=1"})
	if st != 200 {
		t.Fatalf("preview headers: exp 200, got %d %s", st, b)
	}
	for _, leak := range []string{h.Token, "Authorization", "patina_preview", "Cookie"} {
		if strings.Contains(string(b), leak) {
			t.Fatalf("the workspace's server received %q:\n%s", leak, b)
		}
	}
	// A port the workspace does not forward, another workspace's port
	// through this one's path, paths that climb out: never the victim.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", h.Client.Addr()+"/preview/evil/3000/../../victim/3001/hello", nil)
	req.Header.Set("Authorization", "Bearer "+h.Token)
	if resp, err := noFollow.Do(req); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// The router cleans the path into a redirect (which only a bearer
		// of the victim's preview may follow); evil's path never serves it.
		if resp.StatusCode == 200 || strings.Contains(string(b), victimHost) {
			t.Fatalf("a climbing path was served: %d %s", resp.StatusCode, b)
		}
	}
	// Evil's page runs sandboxed in an opaque origin: its scripts cannot
	// read the console's origin (the key, another workspace's preview).
	req, _ = http.NewRequest("GET", h.Client.Addr()+"/preview/evil/3000/hello", nil)
	req.Header.Set("Authorization", "Bearer "+h.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "sandbox ") || strings.Contains(csp, "allow-same-origin") {
		t.Fatalf("a preview's CSP: exp a sandbox without allow-same-origin, got %q", csp)
	}
	if c := resp.Header.Values("Set-Cookie"); len(c) != 0 {
		t.Fatalf("a preview passed Set-Cookie through: %v", c)
	}
	for _, p := range []string{
		"/preview/evil/3001/hello", // victim's port number, not forwarded by evil
		"/preview/evil/3000/%2e%2e/%2e%2e/victim/3001/hello",
		"/preview/evil/3000/..%2f..%2fvictim/3001/hello",
		"/preview/evil/22/",
		"/preview/evil/0/",
		"/preview/nosuch/3000/",
	} {
		st, b := h.Raw("GET", p, "", nil, nil)
		if strings.Contains(string(b), victimHost) {
			t.Fatalf("GET %s reached the victim (%d): %s", p, st, b)
		}
		if st == 200 && !strings.Contains(string(b), "hello from") && !strings.Contains(string(b), "404") {
			t.Errorf("GET %s: unexpected answer %d %s", p, st, b)
		}
	}
	// The host: a preview goes only to the forward's own address.
	st, b = h.Raw("GET", "/preview/evil/7070/", "", nil, nil)
	if st != 404 {
		t.Fatalf("a port evil does not forward: exp 404, got %d %s", st, b)
	}
	// A service worker may not be registered from a preview.
	st, _ = h.Raw("GET", "/preview/evil/3000/hello", "", nil, map[string]string{"Service-Worker": "script"})
	if st != 400 {
		t.Fatalf("a service worker script from a preview: exp 400, got %d", st)
	}
	previewHeadersAttack(t, h)
	previewCookieAttack(t, h, evilFwd.Address)
}

// previewHeadersAttack: the evil workspace's answers through its preview
// may not clear the console's site data, refresh or redirect it elsewhere.
func previewHeadersAttack(t *testing.T, h *Harness) {
	t.Helper()
	noFollow := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(q url.Values) (*http.Response, string) {
		req, _ := http.NewRequest("GET", h.Client.Addr()+"/preview/evil/3000/respond?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+h.Token)
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, b := get(url.Values{"Clear-Site-Data": {`"*"`}, "Refresh": {"0; url=http://evil.example/"}})
	if resp.StatusCode != 200 || !strings.Contains(b, "respond") {
		t.Fatalf("the evil server's answer: exp 200, got %d %s", resp.StatusCode, b)
	}
	for _, hd := range []string{"Clear-Site-Data", "Refresh"} {
		if v := resp.Header.Values(hd); len(v) != 0 {
			t.Errorf("a preview passed %s through: %v", hd, v)
		}
	}
	for _, loc := range []string{"http://evil.example/", "//evil.example/", "/\\evil.example/", "http://" + strings.TrimPrefix(h.Client.Addr(), "http://") + "/"} {
		resp, b := get(url.Values{"status": {"302"}, "Location": {loc}})
		if resp.StatusCode != 422 || resp.Header.Get("Location") != "" || !strings.Contains(b, "redirect") {
			t.Errorf("a redirect to %q through a preview: exp 422 and no Location, got %d %q %s", loc, resp.StatusCode, resp.Header.Get("Location"), b)
		}
	}
	resp, b = get(url.Values{"status": {"302"}, "Location": {"/hello"}})
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "/preview/evil/3000/hello" {
		t.Errorf("a redirect within the preview: exp 302 to /preview/evil/3000/hello, got %d %q %s", resp.StatusCode, resp.Header.Get("Location"), b)
	}
}

// previewCookieAttack: a browser signed in to the console sends the
// preview cookie to every port of the sidecar's host, so the evil
// workspace's server, opened directly on its forward (fwd), receives it.
// Its value opens no /v1 route and no terminal; a page on that port cannot
// use the browser's key on a terminal's WebSocket, nor the cookie on
// another workspace's preview; a key cannot mint sign-in codes.
func previewCookieAttack(t *testing.T, h *Harness, fwd string) {
	t.Helper()
	base := h.Client.Addr()
	sidecarHost := strings.TrimPrefix(base, "http://")
	if host, _, _ := strings.Cut(sidecarHost, ":"); !strings.HasPrefix(fwd, host+":") {
		t.Fatalf("the forward %s is not on the sidecar's host %s: the attack needs both on one host", fwd, sidecarHost)
	}
	jar, err := cookiejar.New(nil) // RFC 6265: cookies do not keep to a port
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	tok, _ := json.Marshal(map[string]string{"token": h.Token})
	req, _ := http.NewRequest("POST", base+"/console/signin", bytes.NewReader(tok))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", base)
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var signed struct{ Key string }
	err = json.NewDecoder(resp.Body).Decode(&signed)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || signed.Key == "" {
		t.Fatalf("sign in: %d %v", resp.StatusCode, err)
	}

	// The browser opens the evil forward; its server reads the cookie.
	resp, err = browser.Get("http://" + fwd + "/preview/steal")
	if err != nil {
		t.Fatal(err)
	}
	seen, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var stolen string
	for _, line := range strings.Split(string(seen), "\n") {
		if _, v, ok := strings.Cut(line, "patina_preview="); ok {
			stolen, _, _ = strings.Cut(strings.TrimSpace(v), ";")
		}
	}
	if stolen == "" {
		t.Fatalf("the evil server did not receive the preview cookie (the attack's premise):\n%s", seen)
	}
	if stolen == signed.Key || strings.Contains(string(seen), signed.Key) {
		t.Fatal("the preview cookie holds the browser's key")
	}
	// The stolen value as a bearer: nothing on /v1.
	for _, p := range []string{"/v1/workspaces", "/v1/workspaces/victim/sessions", "/v1/secrets"} { // not /v1/events: a stream
		if st, b := h.Raw("GET", p, stolen, nil, nil); st != 401 {
			t.Errorf("GET %s with the stolen cookie as a bearer: exp 401, got %d %s", p, st, b)
		}
	}
	if st, b := h.Raw("POST", "/v1/workspaces/victim/sessions/default/exec", stolen, []byte(`{"command":"id"}`), nil); st != 401 {
		t.Errorf("an exec in the victim with the stolen cookie: exp 401, got %d %s", st, b)
	}
	// The terminal's WebSocket, as the evil page would open it.
	term := "ws://" + sidecarHost + "/v1/workspaces/victim/sessions/default/terminal"
	dial := func(q, origin string) int {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		hdr := http.Header{}
		if origin != "" {
			hdr.Set("Origin", origin)
		}
		c, resp, err := websocket.Dial(ctx, term+"?token="+url.QueryEscape(q), &websocket.DialOptions{HTTPHeader: hdr})
		if err == nil {
			c.CloseNow()
			return http.StatusSwitchingProtocols
		}
		if resp == nil {
			t.Fatalf("dial the terminal: %v", err)
		}
		return resp.StatusCode
	}
	evilOrigin := "http://" + fwd
	if st := dial(stolen, evilOrigin); st != 401 {
		t.Errorf("the terminal with the stolen cookie: exp 401, got %d", st)
	}
	if st := dial(stolen, base); st != 401 {
		t.Errorf("the terminal with the stolen cookie and the console's Origin: exp 401, got %d", st)
	}
	// Even the key itself is refused from the evil page's origin (or none).
	if st := dial(signed.Key, evilOrigin); st != 401 {
		t.Errorf("the terminal with the key from the forward's origin: exp 401, got %d", st)
	}
	if st := dial(signed.Key, ""); st != 401 {
		t.Errorf("the terminal with the key and no Origin: exp 401, got %d", st)
	}
	if st, b := h.Raw("GET", "/v1/workspaces", signed.Key, nil, map[string]string{"Sec-Fetch-Site": "same-site", "Origin": evilOrigin}); st != 401 {
		t.Errorf("the key from a page on the forward's port: exp 401, got %d %s", st, b)
	}
	// The console's own page: the key works (the refusals above are real).
	if st := dial(signed.Key, base); st != http.StatusSwitchingProtocols {
		t.Errorf("the terminal with the key from the console's page: exp 101, got %d", st)
	}
	if st, b := h.Raw("GET", "/v1/workspaces", signed.Key, nil, map[string]string{"Sec-Fetch-Site": "same-origin"}); st != 200 {
		t.Errorf("the key from the console's page: exp 200, got %d %s", st, b)
	}
	// The cookie opens previews, but not for a page on the forward's port.
	victim := func(hdr map[string]string) int {
		hdr["Cookie"] = "patina_preview=" + stolen
		st, _ := h.Raw("GET", "/preview/victim/3001/hello", "-", nil, hdr)
		return st
	}
	if st := victim(map[string]string{"Sec-Fetch-Site": "same-site"}); st != 401 {
		t.Errorf("the victim's preview from a page on the forward's port: exp 401, got %d", st)
	}
	if st := victim(map[string]string{"Origin": evilOrigin}); st != 401 {
		t.Errorf("the victim's preview fetched by a page on the forward's port: exp 401, got %d", st)
	}
	if st := victim(map[string]string{"Sec-Fetch-Site": "none"}); st != 200 {
		t.Errorf("the preview opened by its user: exp 200, got %d", st)
	}
	// A key cannot mint codes (each a fresh key: a key forever).
	if st, b := h.Raw("POST", "/v1/console/codes", signed.Key, nil, nil); st != 401 || strings.Contains(string(b), `"code":"`) && !strings.Contains(string(b), "unauthorized") {
		t.Errorf("a code minted with a key: exp 401, got %d %s", st, b)
	}
	if st, b := h.Raw("POST", "/v1/console/codes", "", nil, nil); st != 201 {
		t.Errorf("a code minted with the token: exp 201, got %d %s", st, b)
	}
}

// TestMetrics: /metrics (token, or --metrics-addr without one) parses with
// Prometheus' own text parser and counts what happened.
func TestMetrics(t *testing.T) {
	h := startWithWorkspaces(t, "m1")
	for range 3 {
		h.Exec("m1", "default", "echo hi")
	}
	// An error: an exec in a session that has ended.
	h.Exec("m1", "default", "exit 3")
	if _, err := h.Client.Exec(context.Background(), "m1", "default", client.ExecRequest{Command: "true"}); !IsCode(err, client.CodeEnded) {
		t.Fatalf("exp ended, got %v", err)
	}
	st, b := h.Raw("GET", "/metrics", "", nil, nil)
	if st != 200 {
		t.Fatalf("/metrics: %d %s", st, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, b)
	}
	for name := range fams {
		if !strings.HasPrefix(name, "patina_") {
			t.Errorf("metric %s is not prefixed patina_", name)
		}
	}
	get := func(name string, labels map[string]string) float64 {
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s in:\n%s", name, b)
		}
	next:
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("no %s %v", name, labels)
		return 0
	}
	if n := get("patina_workspaces", map[string]string{"state": "running"}); n != 1 {
		t.Errorf("running workspaces: exp 1, got %v", n)
	}
	if n := get("patina_execs_total", map[string]string{"outcome": "ok"}); n != 4 {
		t.Errorf("execs ok: exp 4, got %v", n)
	}
	if n := get("patina_exec_duration_seconds", nil); n != 4 {
		t.Errorf("exec latency samples: exp 4, got %v", n)
	}
	if n := get("patina_exec_errors_total", map[string]string{"code": "ended"}); n != 1 {
		t.Errorf("exec errors ended: exp 1, got %v", n)
	}
	if n := get("patina_sidecar_memory_bytes", nil); n < 1<<20 {
		t.Errorf("sidecar memory: exp at least 1 MiB, got %v", n)
	}
	get("patina_agent_restarts", nil)
	get("patina_forwards_open", nil)
	if n := get("patina_templates", nil); n != 0 {
		t.Errorf("templates: exp 0 on a new state directory, got %v", n)
	}
}
