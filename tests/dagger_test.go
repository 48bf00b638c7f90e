package tests

// End-to-end tests of the Dagger module (dagger.json and main.go at the
// repository root) on a real Dagger engine: every `dagger call` line of
// README's "Dagger module" section, with the arguments it shows.
//
// Each call goes one of two ways, whichever is available:
//
//   - SDK: when _EXPERIMENTAL_DAGGER_CLI_BIN is set (and, to name the engine,
//     _EXPERIMENTAL_DAGGER_RUNNER_HOST), each call connects a dagger.io/dagger
//     client (which runs that binary for its session: a dagger CLI, or a
//     CLI-free stand-in that speaks `dagger session`), loads the module from
//     the repository root and sends the GraphQL query the CLI would send for
//     the same arguments (see callQuery). No dagger CLI is needed.
//   - CLI: otherwise, a `dagger` on PATH runs `dagger call ARGS...`.
//
// Either way every call is a new session, as separate `dagger call`s are:
// what one call left in the engine's cache is all a second one can reuse.
// Where neither is available, or no engine answers, every test here SKIPS
// with a message containing "Dagger end-to-end tests did NOT run": a skip,
// never a pass, so `go test -v` and CI summaries show that the module went
// untested. The engine-free checks of the module (wiring, help text, cache
// pragmas, generated code) are the root package's tests and hack/daggergen's
// -check; the workspace functions' logic is tested against a real sidecar
// in internal/daggerws.
//
// An engine that cannot resolve the module's pinned images (no registry,
// or a mirror) is given others with PATINA_E2E_GO_IMAGE and
// PATINA_E2E_RUNTIME_IMAGE: each, when set, is passed to every call as
// --go-image, --runtime-image.
// The workspace tests also start a sidecar, so they need Docker as the other
// end-to-end tests do.

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"dagger.io/dagger"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	dockerclient "github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// daggerNotRun starts every skip message of this file.
const daggerNotRun = "Dagger end-to-end tests did NOT run"

// daggerE2E runs `dagger call` argument lists against a real engine.
type daggerE2E struct {
	// cli is the dagger CLI; empty in SDK mode.
	cli  string
	root string
	// env holds variables that --token env:NAME may name (e.g.
	// PATINA_TOKEN), added to the CLI's environment or, in SDK mode, read
	// here before os.Getenv.
	env map[string]string
	// ctor are constructor flags passed to every call (the image
	// overrides).
	ctor []string
}

// needDagger returns a way to reach a working engine or skips the test,
// loudly.
func needDagger(t *testing.T) *daggerE2E {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: " + daggerNotRun)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "dagger.json")); err != nil {
		t.Fatalf("no dagger.json at the repository root %s: %v", root, err)
	}
	d := &daggerE2E{root: root, env: map[string]string{}}
	for _, o := range []struct{ env, flag string }{
		{"PATINA_E2E_GO_IMAGE", "--go-image"},
		{"PATINA_E2E_RUNTIME_IMAGE", "--runtime-image"},
	} {
		if v := os.Getenv(o.env); v != "" {
			d.ctor = append(d.ctor, o.flag, v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	if bin := os.Getenv("_EXPERIMENTAL_DAGGER_CLI_BIN"); bin != "" {
		var logs bytes.Buffer
		c, err := dagger.Connect(ctx, dagger.WithLogOutput(&logs))
		if err == nil {
			var v string
			v, err = c.Version(ctx)
			c.Close()
			if err == nil {
				t.Logf("SDK mode: session through %s, engine %s (%s), version %s",
					bin, os.Getenv("_EXPERIMENTAL_DAGGER_RUNNER_HOST"), strings.Join(d.ctor, " "), v)
				return d
			}
		}
		t.Skipf("_EXPERIMENTAL_DAGGER_CLI_BIN=%s is set, but no engine answered through it (%v): %s\n%s",
			bin, err, daggerNotRun, lastLines(logs.String(), 20))
	}

	bin, err := exec.LookPath("dagger")
	if err != nil {
		t.Skip("no dagger CLI on PATH and no _EXPERIMENTAL_DAGGER_CLI_BIN (with _EXPERIMENTAL_DAGGER_RUNNER_HOST) for the SDK: " + daggerNotRun)
	}
	d.cli = bin
	out, errOut, err := d.runCLI(ctx, "core", "version")
	if err != nil {
		t.Skipf("dagger CLI at %s found, but no engine answered `dagger core version` (%v): %s\n%s%s",
			bin, err, daggerNotRun, out, errOut)
	}
	t.Logf("CLI mode: dagger %s, engine %s", bin, strings.TrimSpace(out))
	return d
}

// runCLI runs the dagger CLI in the module root and returns stdout and
// stderr.
func (d *daggerE2E) runCLI(ctx context.Context, args ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, d.cli, append([]string{"--progress=plain"}, args...)...)
	cmd.Dir = d.root
	cmd.Env = os.Environ()
	for k, v := range d.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// mustCall runs `dagger call args...` and fails the test with the output
// if it fails.
func (d *daggerE2E) mustCall(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := d.call(t, args...)
	if err != nil {
		t.Fatalf("dagger call %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, lastLines(errOut, 60))
	}
	return out
}

// call runs `dagger call args...` (with the constructor flags first) and
// returns what it printed, its log or error text, and how it ended. It
// logs the call and how long it took.
func (d *daggerE2E) call(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), daggerCallTimeout(t))
	defer cancel()
	args = append(slices.Clone(d.ctor), args...)
	start := time.Now()
	var out, errOut string
	var err error
	if d.cli != "" {
		out, errOut, err = d.runCLI(ctx, append([]string{"call"}, args...)...)
	} else {
		out, errOut, err = d.callSDK(ctx, args)
	}
	status := "ok"
	if err != nil {
		status = "failed"
	}
	t.Logf("dagger call %s: %s in %s", strings.Join(args[len(d.ctor):], " "), status, time.Since(start).Round(100*time.Millisecond))
	return out, errOut, err
}

// callSDK is one `dagger call` through the SDK: a new session, the module
// loaded from the repository root, one query. stderr is the session's log,
// then the error.
func (d *daggerE2E) callSDK(ctx context.Context, args []string) (string, string, error) {
	var logs bytes.Buffer
	c, err := dagger.Connect(ctx, dagger.WithLogOutput(&logs), dagger.WithWorkdir(d.root))
	if err != nil {
		return "", logs.String(), fmt.Errorf("connect: %w", err)
	}
	defer c.Close()
	if err := c.ModuleSource(d.root).AsModule().Serve(ctx); err != nil {
		return "", logs.String(), fmt.Errorf("load the module: %w", err)
	}
	query, err := callQuery("patina", args, func(kind flagKind, value string) (string, error) {
		return d.resolve(ctx, c, kind, value)
	})
	if err != nil {
		return "", logs.String(), err
	}
	var data map[string]any
	resp := dagger.Response{Data: &data}
	if err := c.Do(ctx, &dagger.Request{Query: query}, &resp); err != nil {
		return "", logs.String() + "\n" + err.Error(), err
	}
	out, err := leaf(data)
	return out, logs.String(), err
}

// resolve turns a flag's value into what the query passes: an object's ID
// for services, secrets and directories, as the CLI does.
func (d *daggerE2E) resolve(ctx context.Context, c *dagger.Client, kind flagKind, value string) (string, error) {
	var id string
	var err error
	switch kind {
	case kindService:
		// tcp://HOST:PORT, as --sidecar takes it.
		u, perr := url.Parse(value)
		if perr != nil || u.Scheme != "tcp" {
			return "", fmt.Errorf("service %q: want tcp://HOST:PORT", value)
		}
		port, perr := strconv.Atoi(u.Port())
		if perr != nil {
			return "", fmt.Errorf("service %q: %v", value, perr)
		}
		var sid dagger.ServiceID
		sid, err = c.Host().Service([]dagger.PortForward{{Frontend: port, Backend: port}},
			dagger.HostServiceOpts{Host: u.Hostname()}).ID(ctx)
		id = string(sid)
	case kindSecret:
		name, ok := strings.CutPrefix(value, "env:")
		if !ok {
			return "", fmt.Errorf("secret %q: only env:NAME is supported here", value)
		}
		plain, ok := d.env[name]
		if !ok {
			plain, ok = os.LookupEnv(name)
		}
		if !ok {
			return "", fmt.Errorf("secret %q: %s is not set", value, name)
		}
		var sid dagger.SecretID
		sid, err = c.SetSecret(name, plain).ID(ctx)
		id = string(sid)
	case kindDirectory:
		var did dagger.DirectoryID
		did, err = c.Host().Directory(d.abs(value)).ID(ctx)
		id = string(did)
	case kindPath:
		id = d.abs(value)
	default:
		return "", fmt.Errorf("resolve: unexpected kind %d", kind)
	}
	if err != nil {
		return "", err
	}
	return quote(id), nil
}

// abs makes a path relative to the module root, where the CLI runs.
func (d *daggerE2E) abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(d.root, p)
}

type flagKind int

const (
	kindString flagKind = iota
	kindBool
	kindInt
	kindList
	kindService
	kindSecret
	kindDirectory
	// kindPath is a host path the CLI reads relative to its directory.
	kindPath
)

// flagKinds are the types of the flags the tests use (those of the module
// and of the core functions chained after it); the rest are strings.
var flagKinds = map[string]flagKind{
	"integration": kindBool, "allow-failure": kindBool, "fresh": kindBool, "keep-branch": kindBool,
	"timeout-ms": kindInt, "max-files": kindInt, "max-bytes": kindInt,
	"args":    kindList,
	"sidecar": kindService,
	"token":   kindSecret,
	"source":  kindDirectory,
	"path":    kindPath,
}

// callQuery turns `dagger call` arguments into the GraphQL query the CLI
// sends: flags before the first function are the constructor's (the
// module's field, named module), each word starts a selection, kebab-case
// becomes camelCase, "--flag value" and "--flag=value" are arguments, and a
// bool flag needs no value. The chain must end in a field that returns a
// scalar (a string, or Void), as every tested line does. resolve turns
// services, secrets, directories and paths into the literal to pass.
func callQuery(module string, args []string, resolve func(flagKind, string) (string, error)) (string, error) {
	type sel struct {
		field string
		args  []string
	}
	chain := []sel{{field: module}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			chain = append(chain, sel{field: camel(a)})
			continue
		}
		name, value, hasValue := strings.Cut(name, "=")
		kind := flagKinds[name]
		if !hasValue {
			if kind == kindBool {
				value = "true"
			} else {
				if i+1 >= len(args) {
					return "", fmt.Errorf("--%s: no value", name)
				}
				i++
				value = args[i]
			}
		}
		var lit string
		switch kind {
		case kindString:
			lit = quote(value)
		case kindBool:
			b, err := strconv.ParseBool(value)
			if err != nil {
				return "", fmt.Errorf("--%s %q: %v", name, value, err)
			}
			lit = strconv.FormatBool(b)
		case kindInt:
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return "", fmt.Errorf("--%s %q: %v", name, value, err)
			}
			lit = strconv.FormatInt(n, 10)
		case kindList:
			var items []string
			for _, s := range strings.Split(value, ",") {
				items = append(items, quote(s))
			}
			lit = "[" + strings.Join(items, ", ") + "]"
		default:
			var err error
			if lit, err = resolve(kind, value); err != nil {
				return "", fmt.Errorf("--%s: %w", name, err)
			}
		}
		last := &chain[len(chain)-1]
		last.args = append(last.args, camel(name)+": "+lit)
	}
	if len(chain) < 2 {
		return "", errors.New("no function to call")
	}
	var b strings.Builder
	for _, s := range chain {
		b.WriteString(s.field)
		if len(s.args) > 0 {
			b.WriteString("(" + strings.Join(s.args, ", ") + ")")
		}
		b.WriteString(" { ")
	}
	q := strings.TrimSuffix(b.String(), " { ")
	return "{ " + q + strings.Repeat(" }", len(chain)), nil
}

// camel turns a kebab-case CLI name into the API's camelCase one.
func camel(s string) string {
	parts := strings.Split(s, "-")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// quote is a GraphQL string literal (JSON's escapes are GraphQL's).
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// leaf is the one scalar at the end of a query's nested answer, printed
// as the CLI prints it.
func leaf(v any) (string, error) {
	for {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 { // Void (export-image) comes back as {}
				return "", nil
			}
			if len(x) != 1 {
				return "", fmt.Errorf("exp one field in the answer, got %v", x)
			}
			for _, v2 := range x {
				v = v2
			}
		case nil:
			return "", nil
		case string:
			return x, nil
		default:
			return fmt.Sprint(x), nil
		}
	}
}

// daggerCallTimeout leaves a minute of the test binary's deadline for
// reporting; a cold engine pulls images and fills caches, so calls get up
// to 40 minutes (test --integration builds the default workspace image).
func daggerCallTimeout(t *testing.T) time.Duration {
	limit := 40 * time.Minute
	if deadline, ok := t.Deadline(); ok {
		if left := time.Until(deadline) - time.Minute; left < limit {
			limit = left
		}
	}
	if limit <= 0 {
		t.Fatal("no time left for a dagger call: raise go test -timeout")
	}
	return limit
}

// TestCallQuery checks the translation of `dagger call` arguments into the
// query SDK mode sends (no engine needed).
func TestCallQuery(t *testing.T) {
	resolve := func(kind flagKind, v string) (string, error) {
		return quote(fmt.Sprintf("%d:%s", kind, v)), nil
	}
	for _, tc := range []struct {
		args []string
		exp  string
	}{
		{[]string{"build", "export", "--path", "./patina"},
			`{ patina { build { export(path: "7:./patina") } } }`},
		{[]string{"build", "--platform", "linux/arm64", "--version=v1.2.3", "export", "--path", "out"},
			`{ patina { build(platform: "linux/arm64", version: "v1.2.3") { export(path: "7:out") } } }`},
		{[]string{"--go-image", "g:1", "build-image", "--version", "v1", "export-image", "--name", "patina/sidecar:v1"},
			`{ patina(goImage: "g:1") { buildImage(version: "v1") { exportImage(name: "patina/sidecar:v1") } } }`},
		{[]string{"test", "--integration"}, `{ patina { test(integration: true) } }`},
		{[]string{"build-image", "with-exec", "--args", "patina,version", "stdout"},
			`{ patina { buildImage { withExec(args: ["patina", "version"]) { stdout } } } }`},
		{[]string{"workspace", "--sidecar", "tcp://localhost:7070", "--token", "env:PATINA_TOKEN", "--name", "w",
			"exec", "--cmd", `echo "hi"`, "--timeout-ms", "600000", "--allow-failure", "--fresh"},
			`{ patina { workspace(sidecar: "4:tcp://localhost:7070", token: "5:env:PATINA_TOKEN", name: "w") { ` +
				`exec(cmd: "echo \"hi\"", timeoutMs: 600000, allowFailure: true, fresh: true) } } }`},
		{[]string{"--source", "./src", "lint"}, `{ patina(source: "6:./src") { lint } }`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, err := callQuery("patina", tc.args, resolve)
			if err != nil || got != tc.exp {
				t.Errorf("exp %s, got %s (%v)", tc.exp, got, err)
			}
		})
	}
	for _, bad := range [][]string{{"--go-image", "x"}, {"build", "--platform"}, {"exec", "--timeout-ms", "soon"}} {
		if q, err := callQuery("patina", bad, resolve); err == nil {
			t.Errorf("%q: exp an error, got %s", bad, q)
		}
	}
	got, err := leaf(map[string]any{"patina": map[string]any{"build": map[string]any{"export": "/x"}}})
	if err != nil || got != "/x" {
		t.Errorf("leaf: exp /x, got %q, %v", got, err)
	}
	for _, void := range []any{nil, map[string]any{}} {
		if got, err := leaf(map[string]any{"a": map[string]any{"b": void}}); err != nil || got != "" {
			t.Errorf("leaf of Void (%v): exp empty, got %q, %v", void, got, err)
		}
	}
}

// TestDaggerBuild builds the binary for the engine's platform and for
// linux/arm64 (README's two build lines), exports both and checks them.
func TestDaggerBuild(t *testing.T) {
	d := needDagger(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "patina")
	d.mustCall(t, "build", "export", "--path", bin)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	if exp := "patina dev"; !strings.Contains(string(out), exp) {
		t.Errorf("version: exp %q in the output, got %q", exp, out)
	}

	arm := filepath.Join(dir, "patina-arm64")
	d.mustCall(t, "build", "--platform", "linux/arm64", "--version", "v1.2.3", "export", "--path", arm)
	f, err := elf.Open(arm)
	if err != nil {
		t.Fatalf("%s: %v", arm, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 {
		t.Errorf("%s: exp an arm64 binary, got %v", arm, f.Machine)
	}
	b, err := os.ReadFile(arm)
	if err != nil || !bytes.Contains(b, []byte("v1.2.3")) {
		t.Errorf("%s: exp the version v1.2.3 stamped in the binary (%v)", arm, err)
	}
}

// TestDaggerBuildImage checks that the sidecar image holds a working
// binary, and loads it into the host's Docker with export-image (README's
// line), then runs it there.
func TestDaggerBuildImage(t *testing.T) {
	d := needDagger(t)
	out := d.mustCall(t, "build-image", "--version", "e2e-image", "with-exec", "--args", "patina,version", "stdout")
	if exp := "patina e2e-image"; !strings.Contains(out, exp) {
		t.Errorf("exp %q in the output, got %q", exp, out)
	}

	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		t.Fatalf("export-image loads into the host's Docker, which does not answer: %v", err)
	}
	tag := fmt.Sprintf("patina/sidecar:e2e-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := cli.ImageRemove(ctx, tag, image.RemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove %s: %v", tag, err)
		}
	})
	d.mustCall(t, "build-image", "--version", "v1.2.3", "export-image", "--name", tag)
	info, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatalf("export-image: exp %s in the host's Docker, got %v", tag, err)
	}
	if exp := []string{"patina", "serve", "--addr", "0.0.0.0:7070"}; !slices.Equal(info.Config.Entrypoint, exp) {
		t.Errorf("entrypoint: exp %q, got %q", exp, info.Config.Entrypoint)
	}
	code, logs := runOnce(t, cli, tag, []string{"patina"}, "version")
	if code != 0 || !strings.Contains(logs, "patina v1.2.3") {
		t.Errorf("patina version in %s: exp exit 0 and %q, got %d:\n%s", tag, "patina v1.2.3", code, logs)
	}
	code, logs = runOnce(t, cli, tag, []string{"sh", "-c"}, "git --version && debootstrap --version")
	if code != 0 || !strings.Contains(logs, "git version") {
		t.Errorf("git and debootstrap in %s: exp both, got %d:\n%s", tag, code, logs)
	}
}

// runOnce runs a container of img with entrypoint and cmd through the
// Docker API, waits for it, removes it and returns its exit code and
// output.
func runOnce(t *testing.T, cli *dockerclient.Client, img string, entrypoint []string, cmd ...string) (int64, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	created, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Entrypoint: entrypoint, Cmd: cmd}, nil, nil, nil, "")
	if err != nil {
		t.Fatalf("create a container of %s: %v", img, err)
	}
	defer cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
	waitC, errC := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start a container of %s: %v", img, err)
	}
	var code int64
	select {
	case w := <-waitC:
		code = w.StatusCode
	case err := <-errC:
		t.Fatalf("wait for a container of %s: %v", img, err)
	}
	rc, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("logs: %v", err)
	}
	return code, out.String()
}

// TestDaggerTest runs `dagger call test`: go vet and the -short suite must
// pass inside the engine's containers.
func TestDaggerTest(t *testing.T) {
	d := needDagger(t)
	out := d.mustCall(t, "test")
	for _, exp := range []string{"== go vet: ok", "== go test: ok"} {
		if !strings.Contains(out, exp) {
			t.Errorf("exp %q in the report, got:\n%s", exp, out)
		}
	}
}

// TestDaggerTestIntegration runs `dagger call test --integration`: the
// whole suite with a Docker engine started in the test container.
func TestDaggerTestIntegration(t *testing.T) {
	d := needDagger(t)
	out := d.mustCall(t, "test", "--integration")
	for _, exp := range []string{"== go vet: ok", "== go test: ok"} {
		if !strings.Contains(out, exp) {
			t.Errorf("exp %q in the report, got:\n%s", exp, out)
		}
	}
}

// TestDaggerLint runs `dagger call lint`: gofmt, vet and the generated-code
// check must pass.
func TestDaggerLint(t *testing.T) {
	d := needDagger(t)
	out := d.mustCall(t, "lint")
	for _, exp := range []string{"== gofmt: ok", "== go vet: ok", "== generated code: ok"} {
		if !strings.Contains(out, exp) {
			t.Errorf("exp %q in the report, got:\n%s", exp, out)
		}
	}
}

// workspaceE2E drives `dagger call workspace ...` against a sidecar the
// test started: `patina serve` on this machine on a free loopback port,
// reached with --sidecar tcp://localhost:PORT, the token given with
// --token env:PATINA_TOKEN.
type workspaceE2E struct {
	*daggerE2E
	h    *Harness
	port string
}

func startWorkspaceE2E(t *testing.T) workspaceE2E {
	t.Helper()
	d := needDagger(t)
	h := Start(t)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(h.Client.Addr(), "http://"))
	if err != nil {
		t.Fatalf("sidecar address %q: %v", h.Client.Addr(), err)
	}
	d.env["PATINA_TOKEN"] = h.Token
	return workspaceE2E{daggerE2E: d, h: h, port: port}
}

// ws is the arguments of `workspace [--name NAME] FN ARGS...` (no --name
// when name is empty).
func (w workspaceE2E) ws(name, fn string, args ...string) []string {
	out := []string{"workspace", "--sidecar", "tcp://localhost:" + w.port, "--token", "env:PATINA_TOKEN"}
	if name != "" {
		out = append(out, "--name", name)
	}
	return append(append(out, fn), args...)
}

// expIn fails the test unless out contains each of exps.
func expIn(t *testing.T, what, out string, exps ...string) {
	t.Helper()
	for _, exp := range exps {
		if !strings.Contains(out, exp) {
			t.Errorf("%s: exp %q in the output, got:\n%s", what, exp, out)
		}
	}
}

// TestDaggerWorkspace runs every README `workspace` line, in a user's
// order, including a list right after a create (the engine must not answer
// from its cache).
func TestDaggerWorkspace(t *testing.T) {
	w := startWorkspaceE2E(t)
	repo := GitRepo(t, map[string]string{"README.md": "hello\n"})
	gitIn(t, repo, "branch", "release-1.2")
	const name = "fix-tests"

	// Nothing yet; then, after a create, the list must show it.
	expIn(t, "first list", w.mustCall(t, w.ws("", "list")...), "no workspaces")
	out := w.mustCall(t, w.ws(name, "create", "--repo", repo)...)
	expIn(t, "create", out, "name:", name, "patina/"+name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := w.h.Client.GetWorkspace(ctx, name); err != nil {
		t.Fatalf("the sidecar does not know the workspace create made: %v", err)
	}
	out = w.mustCall(t, w.ws("", "list")...)
	expIn(t, "list after create (a cached answer says no workspaces)", out, "NAME", name, "running")
	if strings.Contains(out, "no workspaces") {
		t.Errorf("list after create: got the answer of before the create:\n%s", out)
	}
	out = w.mustCall(t, w.ws("", "list", "--format", "json")...)
	var listed []struct{ Name string }
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 1 || listed[0].Name != name {
		t.Errorf("list --format json: exp [%s], got %v (%v):\n%s", name, listed, err, out)
	}

	expIn(t, "create scratch", w.mustCall(t, w.ws("scratch", "create")...), "name:", "scratch")
	expIn(t, "create --base", w.mustCall(t, w.ws("from-release", "create", "--repo", repo, "--base", "release-1.2")...),
		"patina/from-release", "release-1.2")
	expIn(t, "list of three", w.mustCall(t, w.ws("", "list")...), name, "scratch", "from-release")

	// exec: stdout whole; a failure fails the call with its exit code and
	// stderr, unless --allow-failure; named sessions persist; a timeout
	// fails; --fresh starts the session again.
	expIn(t, "exec", w.mustCall(t, w.ws(name, "exec", "--cmd", "printf 'changed\\n' > README.md && cat README.md")...), "changed")
	out, errOut, err := w.call(t, w.ws(name, "exec", "--cmd", "echo partial; echo oops >&2; (exit 3)")...)
	if err == nil {
		t.Errorf("exec of a failing command: exp the call to fail, got stdout:\n%s", out)
	}
	expIn(t, "failing exec", out+errOut, "exit code 3", "oops")
	expIn(t, "exec --allow-failure", w.mustCall(t, w.ws(name, "exec", "--cmd", "echo partial; (exit 3)", "--allow-failure")...), "partial")
	w.mustCall(t, w.ws(name, "exec", "--cmd", "export BUILT=yes; cd /tmp", "--session", "build", "--timeout-ms", "600000")...)
	expIn(t, "exec --session", w.mustCall(t, w.ws(name, "exec", "--cmd", "echo $BUILT $PWD", "--session", "build")...), "yes /tmp")
	out, errOut, err = w.call(t, w.ws(name, "exec", "--cmd", "sleep 30", "--session", "build", "--timeout-ms", "500")...)
	if err == nil {
		t.Errorf("exec past --timeout-ms: exp the call to fail, got stdout:\n%s", out)
	}
	expIn(t, "exec --timeout-ms", out+errOut, "timed out after 500 ms")
	expIn(t, "exec --fresh", w.mustCall(t, w.ws(name, "exec", "--cmd", "echo \"[$BUILT]\" $PWD", "--session", "build", "--fresh")...), "[] /workspace")

	// diff (and diff > file: the output applies to the repository).
	diff := w.mustCall(t, w.ws(name, "diff")...)
	expIn(t, "diff", diff, "--- a/README.md", "-hello", "+changed")
	apply := exec.Command("git", "apply", "--check", "-")
	apply.Dir = repo
	apply.Stdin = strings.NewReader(diff)
	if b, err := apply.CombinedOutput(); err != nil {
		t.Errorf("git apply --check of the diff: %v\n%s", err, b)
	}

	expIn(t, "commit", w.mustCall(t, w.ws(name, "commit", "--message", "Fix the flaky test")...), "committed ")
	expIn(t, "merge", w.mustCall(t, w.ws(name, "merge")...), "fast-forwarded main")
	w.mustCall(t, w.ws("from-release", "exec", "--cmd", "echo rel > rel.txt")...)
	w.mustCall(t, w.ws("from-release", "diff")...) // merge takes what the diff showed
	w.mustCall(t, w.ws("from-release", "commit", "--message", "release fix")...)
	expIn(t, "merge --into", w.mustCall(t, w.ws("from-release", "merge", "--into", "release-1.2")...), "release-1.2")
	if got := gitIn(t, repo, "show", "release-1.2:rel.txt"); got != "rel\n" {
		t.Errorf("merge --into release-1.2: exp rel.txt on the branch, got %q", got)
	}

	expIn(t, "delete", w.mustCall(t, w.ws(name, "delete")...), "deleted workspace "+name)
	expIn(t, "delete --keep-branch", w.mustCall(t, w.ws("from-release", "delete", "--keep-branch")...), "deleted workspace from-release")
	if got := gitIn(t, repo, "branch", "--list", "patina/*"); !strings.Contains(got, "patina/from-release") || strings.Contains(got, "patina/"+name) {
		t.Errorf("branches after delete and delete --keep-branch: exp only patina/from-release, got %q", got)
	}
	w.mustCall(t, w.ws("scratch", "delete")...)
	expIn(t, "list after the deletes", w.mustCall(t, w.ws("", "list")...), "no workspaces")
}

// TestDaggerWorkspaceDirectory exports a workspace's files (`directory
// export --path`), byte for byte, and builds patina from what an agent
// changed in a workspace of this repository (the Directory as --source).
func TestDaggerWorkspaceDirectory(t *testing.T) {
	w := startWorkspaceE2E(t)
	clone := filepath.Join(t.TempDir(), "patina")
	if out, err := exec.Command("git", "clone", "-q", "--no-hardlinks", RepoRoot(), clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	const name = "agent"
	w.mustCall(t, w.ws(name, "create", "--repo", clone)...)
	// What an agent leaves: a new file in the binary's package, a binary
	// file holding every byte value, an executable, a link.
	agentFile := `package main

import (
	"fmt"
	"os"
)

func init() {
	if len(os.Args) == 2 && os.Args[1] == "agent-was-here" {
		fmt.Println("built from the workspace")
		os.Exit(0)
	}
}
`
	w.mustCall(t, w.ws(name, "exec", "--cmd", "cat > sidecar/cmd/patina/zz_agent.go <<'EOF'\n"+agentFile+"EOF\n"+
		`for i in $(seq 0 255); do printf "\\$(printf %03o $i)"; done > bin.dat && printf '#!/bin/sh\n' > run.sh && chmod 755 run.sh && ln -s README.md link.md`)...)

	out := filepath.Join(t.TempDir(), "out")
	w.mustCall(t, w.ws(name, "directory", "export", "--path", out)...)
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	if b, err := os.ReadFile(filepath.Join(out, "bin.dat")); err != nil || !bytes.Equal(b, allBytes) {
		t.Errorf("bin.dat: exp the 256 byte values, got %d bytes (%v)", len(b), err)
	}
	if st, err := os.Stat(filepath.Join(out, "run.sh")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("run.sh: exp mode 0755, got %v (%v)", st, err)
	}
	readme, _ := os.ReadFile(filepath.Join(clone, "README.md"))
	if b, err := os.ReadFile(filepath.Join(out, "link.md")); err != nil || !bytes.Equal(b, readme) {
		t.Errorf("link.md: exp a copy of README.md, got %d bytes (%v)", len(b), err)
	}
	if _, err := os.Lstat(filepath.Join(out, ".git")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".git: exp it left out, got %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "sidecar/cmd/patina/zz_agent.go")); err != nil || string(b) != agentFile {
		t.Errorf("zz_agent.go: exp the agent's file, got %q (%v)", b, err)
	}
	// Everything tracked is there, byte for byte.
	tracked := strings.Fields(gitIn(t, clone, "ls-files"))
	for _, f := range tracked {
		a, errA := os.ReadFile(filepath.Join(clone, f))
		b, errB := os.ReadFile(filepath.Join(out, f))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: exp the same bytes as in the repository (%v, %v)", f, errA, errB)
		}
	}

	// Build exactly what the agent left, with the exported tree as the
	// module's --source.
	bin := filepath.Join(t.TempDir(), "patina")
	w.mustCall(t, "--source", out, "build", "export", "--path", bin)
	got, err := exec.Command(bin, "agent-was-here").CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != "built from the workspace" {
		t.Errorf("the binary built from the workspace: exp the agent's change, got %q (%v)", got, err)
	}
	w.mustCall(t, w.ws(name, "delete")...)
}

// gitIn runs git in dir and returns its stdout, failing the test on error.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}
