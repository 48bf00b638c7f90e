package tests

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// secretsHarness is a sidecar whose upstream DNS is the lab's and which
// trusts the lab's CA (SSL_CERT_FILE), a secret GH_TOKEN for
// api.secret.test, and the lab's servers.
type secretsHarness struct {
	*Harness
	lab   *NetLab
	sl    *SecretLab
	image string
	value string // the secret's credential, never to be seen in a workspace
}

func startSecrets(t *testing.T) *secretsHarness {
	t.Helper()
	RequireDocker(t)
	img := ToolsImage(t)
	lab := StartNetLab(t)
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	value := "ghp_" + hex.EncodeToString(b)
	sl := StartSecretLab(t, lab, "Bearer "+value)
	h := StartWith(t, t.TempDir(), "e2e-secrets", []string{"SSL_CERT_FILE=" + sl.CAFile}, []string{"--dns", lab.DNS})
	if !strings.Contains(h.Logs(), "network boundary up") {
		t.Fatalf("the sidecar did not set its network boundary up:\n%s", lastLines(h.Logs(), 30))
	}
	ctx := context.Background()
	s, err := h.Client.SetSecret(ctx, "GH_TOKEN", client.SetSecretRequest{Host: "api.secret.test", Header: "Authorization: Bearer " + value})
	if err != nil {
		t.Fatalf("set a secret: %v", err)
	}
	if s.Name != "GH_TOKEN" || s.Header != "Authorization" {
		t.Fatalf("exp the secret described, got %+v", s)
	}
	return &secretsHarness{Harness: h, lab: lab, sl: sl, image: img, value: value}
}

// run runs a command in a workspace and returns its exit code and output.
func (s *secretsHarness) run(ws, cmd string) (int, string) {
	s.t.Helper()
	res := s.ExecReq(ws, "default", client.ExecRequest{Command: cmd, TimeoutMS: 60000})
	return res.ExitCode, res.Stdout + res.Stderr
}

// must runs a command that must succeed.
func (s *secretsHarness) must(ws, cmd string) string {
	s.t.Helper()
	code, out := s.run(ws, cmd)
	if code != 0 {
		s.t.Fatalf("%s: %q: exit %d: %s", ws, cmd, code, out)
	}
	return out
}

// lastSeen is the last request a lab server got for path.
func (s *secretsHarness) lastSeen(path string) SeenRequest {
	s.t.Helper()
	seen := s.sl.Seen(path)
	if len(seen) == 0 {
		s.t.Fatalf("the lab's server saw no request for %s", path)
	}
	return seen[len(seen)-1]
}

const (
	curlTo = `curl -sS --fail-with-body --max-time 20 `
	// pyGet fetches $URL with urllib, the placeholder in X-Token.
	pyGet = `python3 -c 'import os, urllib.request as u; print(u.urlopen(u.Request(os.environ["URL"], headers={"X-Token": os.environ.get("GH_TOKEN", "")}), timeout=20).read().decode())'`
	// issuer prints the issuer of the certificate a TLS server shows.
	issuer = `echo | openssl s_client -connect %s -servername %s 2>/dev/null | openssl x509 -noout -issuer`
)

// A secret used over HTTPS by curl (HTTP/1.1 and HTTP/2), python's urllib
// and git inside a workspace: the server sees the real header, set and
// swapped at the proxy; the workspace never holds the value. Another host,
// plain HTTP, a workspace without the grant and a server that is not the
// secret's host never get it.
func TestSecretsHTTPS(t *testing.T) {
	s := startSecrets(t)
	ctx := context.Background()
	const envValue = "s3cret-env-VALUE-42"
	ws := s.CreateWorkspace(client.CreateWorkspaceRequest{Name: "sec", Image: s.image, Secrets: []string{"GH_TOKEN"},
		SecretEnv: map[string]string{"DB_PASSWORD": envValue}, Env: map[string]string{"PLAIN": "visible"}})
	if strings.Join(ws.Secrets, ",") != "GH_TOKEN" || strings.Join(ws.SecretEnv, ",") != "DB_PASSWORD" {
		t.Fatalf("exp the secret and the secret variable by name, got %v %v", ws.Secrets, ws.SecretEnv)
	}
	placeholder := strings.TrimSpace(s.must("sec", `echo "$GH_TOKEN"`))
	if !strings.HasPrefix(placeholder, "patina-placeholder-") {
		t.Fatalf("exp a placeholder in GH_TOKEN, got %q", placeholder)
	}
	if got := s.must("sec", `echo "$DB_PASSWORD $PLAIN"`); got != envValue+" visible\n" {
		t.Fatalf("exp the secret variable in the session, got %q", got)
	}
	want := "Bearer " + s.value

	// curl, HTTP/1.1 then HTTP/2: the header is set (none was sent), the
	// placeholder swapped where it was put.
	s.must("sec", curlTo+`--http1.1 https://api.secret.test:9443/curl1 -H "X-Token: $GH_TOKEN"`)
	if got := s.lastSeen("/curl1"); got.Header.Get("Authorization") != want || got.Header.Get("X-Token") != want {
		t.Fatalf("curl: exp the server to get the secret, got %v", got.Header)
	}
	if v := s.must("sec", curlTo+`--http2 -o /dev/null -w '%{http_version}' https://api.secret.test:9443/curl2 -H "Authorization: token $GH_TOKEN"`); v != "2" {
		t.Fatalf("curl --http2: exp HTTP/2 between curl and the proxy, got %q", v)
	}
	if got := s.lastSeen("/curl2"); got.Header.Get("Authorization") != want {
		t.Fatalf("curl over HTTP/2: exp the secret's header, got %v", got.Header)
	}
	// python (urllib, its default context: SSL_CERT_FILE).
	s.must("sec", "URL=https://api.secret.test:9443/python "+pyGet)
	if got := s.lastSeen("/python"); got.Header.Get("Authorization") != want || got.Header.Get("X-Token") != want {
		t.Fatalf("python: exp the secret, got %v", got.Header)
	}
	// git over smart HTTP: the server refuses whoever lacks the header.
	if out := s.must("sec", `GIT_TERMINAL_PROMPT=0 git clone -q https://api.secret.test:9443/git/repo.git /tmp/clone && cat /tmp/clone/README`); out != "cloned through patina\n" {
		t.Fatalf("git clone through the secret: got %q", out)
	}
	// The secret's host shows patina's certificate; another host its own.
	if out := s.must("sec", fmt.Sprintf(issuer, "api.secret.test:9443", "api.secret.test")); !strings.Contains(out, "patina workspace CA") {
		t.Fatalf("exp the secret's host terminated with patina's CA, got %q", out)
	}
	if out := s.must("sec", fmt.Sprintf(issuer, "other.test:9443", "other.test")); !strings.Contains(out, "patina test lab CA") {
		t.Fatalf("exp another host tunnelled untouched (its own certificate), got %q", out)
	}
	// Another host: the placeholder goes as it is, no header is added.
	s.must("sec", curlTo+`-k https://other.test:9443/other -H "X-Token: $GH_TOKEN"`)
	if got := s.lastSeen("/other"); got.Header.Get("Authorization") != "" || got.Header.Get("X-Token") != placeholder {
		t.Fatalf("another host: exp the placeholder untouched and no header, got %v", got.Header)
	}
	// Plain http:// to the secret's host: never.
	s.must("sec", curlTo+`http://api.secret.test:9080/plain -H "X-Token: $GH_TOKEN"`)
	if got := s.lastSeen("/plain"); got.Header.Get("Authorization") != "" || got.Header.Get("X-Token") != placeholder {
		t.Fatalf("plain HTTP: exp nothing injected, got %v", got.Header)
	}
	// A server that says it is the secret's host but cannot prove it gets
	// nothing: the workspace gets a 502.
	code, out := s.run("sec", curlTo+`--resolve api.secret.test:9444:203.0.113.10 https://api.secret.test:9444/impostor`)
	if code == 0 || !strings.Contains(out, "502") && !strings.Contains(out, "not verified") {
		t.Fatalf("an impostor server: exp a 502, got %d %q", code, out)
	}
	if seen := s.sl.Seen("/impostor"); len(seen) != 0 {
		t.Fatalf("an impostor server got a request: %v", seen[0].Header)
	}
	// A request on the secret's connection for another host: refused.
	code, out = s.run("sec", curlTo+`-o /dev/null -w '%{http_code}' https://api.secret.test:9443/misdirected -H 'Host: other.test'`)
	if !strings.Contains(out, "421") || len(s.sl.Seen("/misdirected")) != 0 {
		t.Fatalf("another Host on the secret's connection: exp 421 and nothing sent, got %d %q", code, out)
	}

	// A workspace without the grant gets no header.
	s.CreateWorkspace(client.CreateWorkspaceRequest{Name: "nogrant", Image: s.image})
	s.must("nogrant", curlTo+`-k https://api.secret.test:9443/nogrant -H "X-Token: `+placeholder+`"`)
	if got := s.lastSeen("/nogrant"); got.Header.Get("Authorization") != "" || got.Header.Get("X-Token") != placeholder {
		t.Fatalf("a workspace without the grant: exp nothing injected, got %v", got.Header)
	}
	if out := s.must("nogrant", fmt.Sprintf(issuer, "api.secret.test:9443", "api.secret.test")); !strings.Contains(out, "patina test lab CA") {
		t.Fatalf("a workspace without the grant: exp its TLS untouched, got %q", out)
	}

	// The event log shows a command holding the secret variable's value
	// redacted.
	s.must("sec", `test -n "`+envValue+`"`)
	logs, err := s.Client.Log(ctx, "sec")
	if err != nil {
		t.Fatal(err)
	}
	redacted := false
	for _, e := range logs {
		redacted = redacted || strings.Contains(e.Message, `test -n "[redacted]"`)
	}
	if !redacted {
		t.Fatalf("exp the command in the log with its value redacted, got %+v", logs)
	}

	// Never shown: ws show (API and CLI), the secrets list, the event log,
	// docker inspect, the sidecar's logs.
	_, show := s.Raw("GET", "/v1/workspaces/sec", "", nil, nil)
	_, list := s.Raw("GET", "/v1/secrets", "", nil, nil)
	cli, err := exec.Command(s.Bin, "ws", "show", "sec", "--state-dir", s.StateDir, "--token", s.Token).CombinedOutput()
	if err != nil || !strings.Contains(string(cli), "DB_PASSWORD=(secret)") || !strings.Contains(string(cli), "GH_TOKEN") {
		t.Fatalf("ws show: %v\n%s", err, cli)
	}
	logJSON, _ := json.Marshal(logs)
	inspect, err := dockerClient(t).ContainerInspect(ctx, ws.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	inspectJSON, _ := json.Marshal(inspect)
	for what, text := range map[string]string{
		"ws show (API)": string(show), "ws show": string(cli), "the secrets list": string(list),
		"the event log": string(logJSON), "docker inspect": string(inspectJSON), "the sidecar's log": s.Logs(),
	} {
		for _, v := range []string{s.value, envValue} {
			if strings.Contains(text, v) {
				t.Errorf("%s shows a secret value (%.8s…)", what, v)
			}
		}
	}
	if strings.Contains(string(inspectJSON), placeholder) || strings.Contains(string(inspectJSON), "DB_PASSWORD") {
		t.Error("docker inspect shows the secrets' variables: they must come through the agent, not the container's configuration")
	}

	// Never readable in the workspace: every process's environment,
	// command line and memory, every file it can see, the CA's key.
	s.scanWorkspace(t, ws.ContainerID, placeholder, envValue)
}

// scanWorkspace looks, from the host, through everything the workspace's
// processes hold or can read for the secret's value and the sidecar CA's
// key; the placeholder and a secret variable's value, which are there (in
// environments, memory, the session's history file), show that the scan
// sees what it must.
func (s *secretsHarness) scanWorkspace(t *testing.T, containerID, placeholder, envValue string) {
	t.Helper()
	kb, err := os.ReadFile(filepath.Join(s.StateDir, "ca", "ca-key.pem"))
	if err != nil {
		t.Fatalf("the CA's key: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(s.StateDir, "ca", "ca-key.pem")); fi == nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("exp the CA's key 0600, got %v", fi)
	}
	block, _ := pem.Decode(kb)
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pemLines := strings.Split(strings.TrimSpace(string(kb)), "\n")
	needles := map[string][]byte{
		"the secret's value":        []byte(s.value),
		"the CA's key (DER)":        block.Bytes,
		"the CA's key (its scalar)": key.D.FillBytes(make([]byte, 32)),
		"the CA's key (PEM)":        []byte(pemLines[1]),
		"the placeholder":           []byte(placeholder),
		"the secret variable":       []byte(envValue),
	}
	inspect, err := dockerClient(t).ContainerInspect(context.Background(), containerID)
	if err != nil {
		t.Fatal(err)
	}
	hits, procs, files := scanContainer(t, inspect.State.Pid, needles)
	for name := range needles {
		if name == "the placeholder" || name == "the secret variable" {
			continue
		}
		for _, where := range hits[name] {
			t.Errorf("%s is readable in the workspace: %s", name, where)
		}
	}
	var env, mem, file bool
	for _, where := range hits["the placeholder"] {
		env = env || strings.HasSuffix(where, "/environ")
		mem = mem || strings.HasSuffix(where, "/mem")
	}
	for _, where := range hits["the secret variable"] {
		file = file || !strings.HasPrefix(where, "/proc/")
	}
	if !env || !mem || !file || procs < 3 || files < 1000 {
		t.Fatalf("the scan is blind: the placeholder found in an environment %v and in memory %v, the secret variable in a file %v; %d processes, %d files scanned", env, mem, file, procs, files)
	}
	t.Logf("scanned %d processes and %d files of the workspace", procs, files)
}

// scanContainer finds needles in what the processes of the container
// whose first process is pid hold: environment, command line, memory; and
// in every regular file they see (through /proc/<pid>/root, mounts
// included). It returns where each was found, and how many processes and
// files it read.
func scanContainer(t *testing.T, pid int, needles map[string][]byte) (map[string][]string, int, int) {
	t.Helper()
	hits := map[string][]string{}
	longest := 0
	for _, n := range needles {
		longest = max(longest, len(n))
	}
	find := func(where string, r io.Reader) {
		buf := make([]byte, 1<<20)
		var tail []byte
		found := map[string]bool{}
		for {
			n, err := r.Read(buf)
			if n > 0 {
				chunk := append(tail, buf[:n]...)
				for name, nd := range needles {
					if !found[name] && bytes.Contains(chunk, nd) {
						found[name] = true
						hits[name] = append(hits[name], where)
					}
				}
				if len(chunk) > longest {
					tail = append([]byte(nil), chunk[len(chunk)-longest:]...)
				} else {
					tail = chunk
				}
			}
			if err != nil {
				return
			}
		}
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		t.Fatalf("the workspace's pid namespace: %v", err)
	}
	entries, _ := os.ReadDir("/proc")
	procs := 0
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p)); err != nil || l != ns {
			continue
		}
		procs++
		for _, f := range []string{"environ", "cmdline"} {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", p, f)); err == nil {
				find(fmt.Sprintf("/proc/%d/%s", p, f), bytes.NewReader(b))
			}
		}
		scanMemory(p, func(r io.Reader) { find(fmt.Sprintf("/proc/%d/mem", p), r) })
	}
	// The trailing slash: the root itself is a link, which WalkDir would
	// not enter.
	root := fmt.Sprintf("/proc/%d/root/", pid)
	files := 0
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel := "/" + strings.TrimPrefix(path, root)
		if d.IsDir() && (rel == "/proc" || rel == "/sys" || rel == "/dev") {
			return fs.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		files++
		find(rel, io.LimitReader(f, 512<<20))
		f.Close()
		return nil
	})
	return hits, procs, files
}

// scanMemory reads every readable mapping of process p.
func scanMemory(p int, read func(io.Reader)) {
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", p))
	if err != nil {
		return
	}
	defer maps.Close()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", p))
	if err != nil {
		return
	}
	defer mem.Close()
	var regions []io.Reader
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1][0] != 'r' || (len(f) >= 6 && (f[5] == "[vvar]" || f[5] == "[vsyscall]")) {
			continue
		}
		from, to, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(from, 16, 64)
		end, err2 := strconv.ParseUint(to, 16, 64)
		if err1 != nil || err2 != nil || end <= start || end-start > 8<<30 {
			continue
		}
		regions = append(regions, io.NewSectionReader(mem, int64(start), int64(end-start)))
	}
	// One reader per region, so a region that cannot be read ends only
	// itself.
	for _, r := range regions {
		read(r)
	}
}

// A fork does not hold its source's secrets unless asked; a sidecar
// restart (kill -9) keeps the secrets and the grants.
func TestSecretsForkAndRestart(t *testing.T) {
	s := startSecrets(t)
	ctx := context.Background()
	s.CreateWorkspace(client.CreateWorkspaceRequest{Name: "src", Image: s.image, Secrets: []string{"GH_TOKEN"}})
	want := "Bearer " + s.value
	s.must("src", curlTo+`https://api.secret.test:9443/src`)
	if got := s.lastSeen("/src"); got.Header.Get("Authorization") != want {
		t.Fatalf("the source: exp the secret, got %v", got.Header)
	}
	fork, err := s.Client.ForkWorkspace(ctx, "src", client.ForkWorkspaceRequest{Name: "fork"})
	if err != nil {
		t.Fatal(err)
	}
	if len(fork.Secrets) != 0 {
		t.Fatalf("a fork not asked to keep its source's secrets holds %v", fork.Secrets)
	}
	s.must("fork", curlTo+`-k https://api.secret.test:9443/fork -H "X-Token: $GH_TOKEN"`)
	if got := s.lastSeen("/fork"); got.Header.Get("Authorization") != "" || strings.Contains(got.Header.Get("X-Token"), s.value) {
		t.Fatalf("a fork without the secrets got them: %v", got.Header)
	}
	kept, err := s.Client.ForkWorkspace(ctx, "src", client.ForkWorkspaceRequest{Name: "kept", KeepSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(kept.Secrets, ",") != "GH_TOKEN" {
		t.Fatalf("a fork asked to keep the secrets holds %v", kept.Secrets)
	}
	s.must("kept", curlTo+`https://api.secret.test:9443/kept`)
	if got := s.lastSeen("/kept"); got.Header.Get("Authorization") != want {
		t.Fatalf("a fork keeping the secrets: exp the secret, got %v", got.Header)
	}

	s.Kill9()
	s.Launch()
	WaitFor(t, "the workspace adopted", 60*time.Second, func() bool {
		w, err := s.Client.GetWorkspace(ctx, "src")
		return err == nil && w.Status == client.StatusRunning
	})
	list, err := s.Client.ListSecrets(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "GH_TOKEN" {
		t.Fatalf("after a restart: exp the secret listed, got %+v %v", list, err)
	}
	s.must("src", curlTo+`https://api.secret.test:9443/restarted`)
	if got := s.lastSeen("/restarted"); got.Header.Get("Authorization") != want {
		t.Fatalf("after a restart: exp the secret still set, got %v", got.Header)
	}
	// A new session after the restart has the placeholder and the CA.
	s.CreateSession("src", client.CreateSessionRequest{ID: "late"})
	res := s.ExecReq("src", "late", client.ExecRequest{Command: curlTo + `https://api.secret.test:9443/late -H "X-Token: $GH_TOKEN"`, TimeoutMS: 60000})
	if res.ExitCode != 0 {
		t.Fatalf("a new session after the restart: %+v", res)
	}
	if got := s.lastSeen("/late"); got.Header.Get("X-Token") != want {
		t.Fatalf("a new session after the restart: exp the placeholder swapped, got %v", got.Header)
	}
	if strings.Contains(s.Logs(), s.value) {
		t.Fatal("the sidecar's log shows the secret's value")
	}
}
