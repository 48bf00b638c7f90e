package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dockercontainer "github.com/docker/docker/api/types/container"
	dockerimage "github.com/docker/docker/api/types/image"
	dockerclient "github.com/docker/docker/client"

	"github.com/patina-dev/patina/sidecar/client"
)

// templateCleanup removes, after everything else (the harness's cleanup
// deletes the workspaces first), the template images whose names it is
// given. Call it before Start.
func templateCleanup(t *testing.T) func(name string) {
	t.Helper()
	var names []string
	t.Cleanup(func() {
		dc, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
		if err != nil {
			return
		}
		defer dc.Close()
		for _, n := range names {
			_, _ = dc.ImageRemove(context.Background(), "patina-template:"+n, dockerimage.RemoveOptions{Force: true, PruneChildren: true})
		}
	})
	return func(name string) { names = append(names, name) }
}

// createBuilding creates a workspace whose create may build a template
// (minutes on a loaded machine: the harness's create allows two).
func createBuilding(t *testing.T, h *Harness, req client.CreateWorkspaceRequest) client.Workspace {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	w, err := h.Client.CreateWorkspace(ctx, req)
	if err != nil {
		t.Fatalf("create workspace %s: %v", req.Name, err)
	}
	return w
}

// commitFiles writes files into repo and commits them.
func commitFiles(t *testing.T, repo string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "change"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

const devcontainerJSON = `{
  // %s: makes this test's content, and so its template, its own
  "name": "proj",
  "build": {
    "dockerfile": "Dockerfile",
    "args": {"GREETING": "hello-arg"},
  },
  "containerEnv": {"PROJECT_ENV": "from-devcontainer", "SHARED": "devcontainer"},
  "remoteEnv": {"REMOTE_ONE": "${containerWorkspaceFolder}/r1"},
  "workspaceFolder": "/workspaces/proj",
  /* created once, in the template */
  "onCreateCommand": "echo oncreate > /opt/oncreate",
  "postCreateCommand": {
    "tool": ["sh", "-c", "printf '#!/bin/sh\\necho projtool\\n' > /usr/local/bin/projtool && chmod +x /usr/local/bin/projtool"],
    "probe": "ls /sys/class/net > /opt/create-net; grep CapEff /proc/self/status > /opt/create-caps; ls /workspace > /opt/create-files",
  },
  "forwardPorts": [8080],
  "customizations": {"vscode": {}},
}
`

const projDockerfile = "FROM patina/base:bookworm\nARG GREETING\nRUN echo \"$GREETING\" > /etc/greeting\nCOPY hello.txt /opt/hello.txt\n"

// TestTemplateDevcontainer: a repository with a devcontainer.json (a
// Dockerfile from the local base image, build args, create commands,
// containerEnv/remoteEnv, workspaceFolder) gives its workspaces that
// environment; the second workspace of the same content reuses the
// template; a changed Dockerfile makes a new one; the create commands ran
// with no network and a workspace's capabilities; ls and rm.
func TestTemplateDevcontainer(t *testing.T) {
	track := templateCleanup(t)
	h := Start(t)
	ctx := context.Background()
	marker := fmt.Sprintf("test-%d", time.Now().UnixNano())
	repo := GitRepo(t, map[string]string{
		"README":                          "proj\n",
		".devcontainer/devcontainer.json": fmt.Sprintf(devcontainerJSON, marker),
		".devcontainer/Dockerfile":        projDockerfile,
		".devcontainer/hello.txt":         "hello-file\n",
	})

	start := time.Now()
	w1 := createBuilding(t, h, client.CreateWorkspaceRequest{Name: "dc1", Repo: repo, Env: map[string]string{"SHARED": "request"}})
	first := time.Since(start)
	if !strings.HasPrefix(w1.Template, "dc-") || w1.Image != "patina-template:"+w1.Template {
		t.Fatalf("workspace of a devcontainer repository: template %q image %q", w1.Template, w1.Image)
	}
	track(w1.Template)
	got := h.Out("dc1", "default", "cat /etc/greeting /opt/hello.txt /opt/oncreate; projtool; echo $PROJECT_ENV $SHARED $REMOTE_ONE; readlink /workspaces/proj; cat /workspaces/proj/README")
	if want := "hello-arg\nhello-file\noncreate\nprojtool\nfrom-devcontainer request /workspace/r1\n/workspace\nproj\n"; got != want {
		t.Fatalf("the devcontainer's environment: got %q, want %q", got, want)
	}
	// The create commands ran without network, with a workspace's
	// capabilities, in the build context's files.
	if got := h.Out("dc1", "default", "cat /opt/create-net"); got != "lo\n" {
		t.Fatalf("the create commands saw network interfaces %q, want only lo", got)
	}
	if created, own := h.Out("dc1", "default", "cat /opt/create-caps"), h.Out("dc1", "default", "grep CapEff /proc/self/status"); created != own {
		t.Fatalf("the create commands had capabilities %q, a workspace %q", created, own)
	}
	if got := h.Out("dc1", "default", "cat /opt/create-files"); !strings.Contains(got, "Dockerfile") || !strings.Contains(got, "hello.txt") {
		t.Fatalf("the create commands' /workspace: %q", got)
	}

	tpl, err := h.Client.GetTemplate(ctx, w1.Template)
	if err != nil {
		t.Fatal(err)
	}
	if tpl.Source != ".devcontainer/devcontainer.json" || tpl.WorkspaceFolder != "/workspaces/proj" || len(tpl.ForwardPorts) != 1 || tpl.ForwardPorts[0] != 8080 ||
		tpl.Env["PROJECT_ENV"] != "from-devcontainer" || !contains(tpl.Ignored, "customizations") || len(tpl.Hash) != 64 || !strings.HasPrefix(w1.Template, "dc-"+tpl.Hash[:12]) {
		t.Fatalf("template: %+v", tpl)
	}

	// The same content: the same template, not built again.
	start = time.Now()
	w2 := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "dc2", Repo: repo})
	second := time.Since(start)
	t.Logf("create -> running: first (build) %v, second (template) %v", first, second)
	if w2.Template != w1.Template {
		t.Fatalf("second workspace: template %q, want %q", w2.Template, w1.Template)
	}
	again, err := h.Client.GetTemplate(ctx, w1.Template)
	if err != nil || again.ImageID != tpl.ImageID || !again.CreatedAt.Equal(tpl.CreatedAt) {
		t.Fatalf("the template was built again: %+v (was %+v) %v", again, tpl, err)
	}
	if got := h.Out("dc2", "default", "projtool; echo $SHARED"); got != "projtool\ndevcontainer\n" {
		t.Fatalf("second workspace: %q", got)
	}
	// A commit that leaves the devcontainer alone keeps its template.
	commitFiles(t, repo, map[string]string{"src.txt": "more\n"})
	if w := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "dc2b", Repo: repo}); w.Template != w1.Template {
		t.Fatalf("a change outside the build context made template %q", w.Template)
	}

	// A changed Dockerfile: a new template.
	commitFiles(t, repo, map[string]string{".devcontainer/Dockerfile": projDockerfile + "RUN echo v2 > /etc/version\n"})
	w3 := createBuilding(t, h, client.CreateWorkspaceRequest{Name: "dc3", Repo: repo})
	track(w3.Template)
	if w3.Template == w1.Template || w3.Template == "" {
		t.Fatalf("changed Dockerfile: template %q, the old one %q", w3.Template, w1.Template)
	}
	if got := h.Out("dc3", "default", "cat /etc/version"); got != "v2\n" {
		t.Fatalf("changed Dockerfile: %q", got)
	}
	// An image named on create wins over the devcontainer.
	if w := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "plain", Repo: repo, Image: "patina/base:bookworm"}); w.Template != "" {
		t.Fatalf("image given: template %q", w.Template)
	}

	// ls, a workspace from a template by name, rm (refused while used).
	list, err := h.Client.ListTemplates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range list {
		names = append(names, l.Name)
	}
	if !contains(names, w1.Template) || !contains(names, w3.Template) {
		t.Fatalf("template ls: %v", names)
	}
	if w := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "bytpl", Template: w1.Template}); w.Template != w1.Template || h.Out("bytpl", "default", "projtool") != "projtool\n" {
		t.Fatalf("ws create --template: %+v", w)
	}
	if err := h.Client.DeleteTemplate(ctx, w3.Template); !IsCode(err, client.CodeConflict) {
		t.Fatalf("rm of a template in use: %v, want a conflict", err)
	}
	if err := h.Client.DeleteWorkspace(ctx, "dc3", client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.Client.DeleteTemplate(ctx, w3.Template); err != nil {
		t.Fatalf("rm: %v", err)
	}
	if _, err := h.Client.GetTemplate(ctx, w3.Template); !IsCode(err, client.CodeNotFound) {
		t.Fatalf("after rm: %v", err)
	}
	if _, err := h.Client.CreateWorkspace(ctx, client.CreateWorkspaceRequest{Template: "no-such-template"}); !IsCode(err, client.CodeInvalid) {
		t.Fatalf("create from a missing template: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// TestTemplateErrors: a bad devcontainer.json, a failing build and a
// failing create command each give a 400 naming what failed with the
// build's last lines, and leave no workspace; what tries to leave the
// repository (a context of "../..", a symlink to a host file) gets
// nothing of the host.
func TestTemplateErrors(t *testing.T) {
	track := templateCleanup(t)
	h := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	marker := fmt.Sprintf("# %d\n", time.Now().UnixNano())
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"syntax", map[string]string{".devcontainer.json": `{"image": "patina/base:bookworm",,, oops`}, []string{".devcontainer.json"}},
		{"nothing", map[string]string{".devcontainer.json": `{"name": "x"}`}, []string{"neither an image nor a build.dockerfile"}},
		{"compose", map[string]string{".devcontainer.json": `{"dockerComposeFile": "dc.yml", "service": "a"}`}, []string{"Compose"}},
		{"escape", map[string]string{".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": "../.."}}`, ".devcontainer/Dockerfile": "FROM patina/base:bookworm\n"}, []string{"leaves the repository"}},
		{"nodockerfile", map[string]string{".devcontainer.json": `{"build": {"dockerfile": "missing/Dockerfile"}}`}, []string{"missing/Dockerfile"}},
		{"build", map[string]string{".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}}`,
			".devcontainer/Dockerfile": "FROM patina/base:bookworm\n" + marker + "RUN echo step-one-output && echo about-to-fail >&2 && exit 3\n"}, []string{"step-one-output", "about-to-fail"}},
		{"postcreate", map[string]string{".devcontainer.json": `{"image": "patina/base:bookworm", "postCreateCommand": "echo ` + strings.TrimSpace(strings.TrimPrefix(marker, "# ")) + ` post-output; exit 7"}`}, []string{"post-output", "exit status 7"}},
		{"nopull", map[string]string{".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}}`,
			".devcontainer/Dockerfile": marker + "FROM patina-no-such-image/base:never\n"}, []string{"patina-no-such-image"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := GitRepo(t, tc.files)
			_, err := h.Client.CreateWorkspace(ctx, client.CreateWorkspaceRequest{Name: "bad-" + tc.name, Repo: repo})
			if !IsCode(err, client.CodeInvalid) {
				t.Fatalf("create: %v, want a 400", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("create: %v, want it to say %q", err, w)
				}
			}
			if _, err := h.Client.GetWorkspace(ctx, "bad-"+tc.name); !IsCode(err, client.CodeNotFound) {
				t.Fatalf("a failed create left a workspace: %v", err)
			}
			// The same answer from template build, streamed or not.
			var progress strings.Builder
			_, err = h.Client.BuildTemplateProgress(ctx, client.BuildTemplateRequest{Repo: repo}, &progress)
			if !IsCode(err, client.CodeInvalid) {
				t.Fatalf("template build: %v, want a 400", err)
			}
		})
	}

	// A symlink in the build context to a host file: the build sees a
	// link, never the host's file.
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host-secret-content\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := GitRepo(t, map[string]string{
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}, "postCreateCommand": "cat /workspace/link > /opt/via-create 2>&1 || echo unreadable > /opt/via-create"}`,
		".devcontainer/Dockerfile":        "FROM patina/base:bookworm\n" + marker + "COPY . /ctx/\n",
	})
	if err := os.Symlink(secret, filepath.Join(repo, ".devcontainer", "link")); err != nil {
		t.Fatal(err)
	}
	commitFiles(t, repo, nil)
	w := createBuilding(t, h, client.CreateWorkspaceRequest{Name: "links", Repo: repo})
	track(w.Template)
	got := h.Out("links", "default", "cat /ctx/link /opt/via-create 2>&1; readlink /ctx/link")
	if strings.Contains(got, "host-secret-content") || !strings.Contains(got, secret) {
		t.Fatalf("a symlink to a host file in the build context: %q", got)
	}
}

// TestTemplateDockerfile: a plain Dockerfile named on create (and by
// template build, streaming its output) makes the workspace's template.
func TestTemplateDockerfile(t *testing.T) {
	track := templateCleanup(t)
	h := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	repo := GitRepo(t, map[string]string{
		"tools/Dockerfile": fmt.Sprintf("FROM patina/base:bookworm\n# %d\nCOPY data.txt /opt/data.txt\nRUN echo built-by-dockerfile\n", time.Now().UnixNano()),
		"tools/data.txt":   "data\n",
	})
	var progress strings.Builder
	tpl, err := h.Client.BuildTemplateProgress(ctx, client.BuildTemplateRequest{Repo: repo, Dockerfile: "tools/Dockerfile", Name: fmt.Sprintf("t-%d", time.Now().UnixNano())}, &progress)
	if err != nil {
		t.Fatal(err)
	}
	track(tpl.Name)
	if !tpl.Built || !strings.Contains(progress.String(), "built-by-dockerfile") {
		t.Fatalf("template build: %+v, progress %q", tpl, progress.String())
	}
	w := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "df", Repo: repo, Dockerfile: "tools/Dockerfile"})
	track(w.Template)
	if got := h.Out("df", "default", "cat /opt/data.txt"); got != "data\n" {
		t.Fatalf("workspace from a Dockerfile: %q", got)
	}
	again, err := h.Client.GetTemplate(ctx, w.Template)
	if err != nil || again.Hash != tpl.Hash {
		t.Fatalf("the create's template %+v, the build's %+v: %v", again, tpl, err)
	}
	if _, err := h.Client.CreateWorkspace(ctx, client.CreateWorkspaceRequest{Repo: repo, Dockerfile: "tools/nope"}); !IsCode(err, client.CodeInvalid) {
		t.Fatalf("a missing Dockerfile: %v", err)
	}
}

// TestHostileTemplate: a repository's Dockerfile or devcontainer.json that
// would make the engine fetch something (dockerd downloads ADD URLs and
// pulls missing images outside the build's "none" network, from the LAN,
// cloud metadata or a registry) is refused with a 400 before any build,
// and no image is pulled.
func TestHostileTemplate(t *testing.T) {
	h := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dc, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	stamp := time.Now().UnixNano()
	missing := fmt.Sprintf("patina-hostile-missing-%d/x:1", stamp)

	// A local image that carries an ONBUILD trigger fetching a URL.
	c, err := dc.ContainerCreate(ctx, &dockercontainer.Config{Image: "patina/base:bookworm", Cmd: []string{"true"}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	onbuild := fmt.Sprintf("patina-hostile-onbuild:%d", stamp)
	_, err = dc.ContainerCommit(ctx, c.ID, dockercontainer.CommitOptions{Reference: onbuild, Changes: []string{"ONBUILD ADD http://203.0.113.5/x /x"}})
	_ = dc.ContainerRemove(context.WithoutCancel(ctx), c.ID, dockercontainer.RemoveOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = dc.ImageRemove(context.Background(), onbuild, dockerimage.RemoveOptions{Force: true, PruneChildren: true})
	})

	build := func(df string) map[string]string {
		return map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "args": {"X": "` + missing + `"}}}`,
			".devcontainer/Dockerfile":        df,
		}
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"add-url", build("FROM patina/base:bookworm\nADD http://203.0.113.5/x /x\n"), []string{"ADD http://203.0.113.5/x", "line 2"}},
		{"add-url-continued", build("FROM patina/base:bookworm\nADD \\\n# hide\n  http://203.0.113.5/x \\\n  /x\n"), []string{"ADD http://203.0.113.5/x"}},
		{"onbuild-add-url", build("FROM patina/base:bookworm\nONBUILD ADD http://203.0.113.5/x /x\n"), []string{"ADD http://203.0.113.5/x"}},
		{"from-onbuild-image", build("FROM " + onbuild + "\nRUN true\n"), []string{onbuild, "ONBUILD"}},
		{"from-missing", build("FROM " + missing + "\n"), []string{missing, "not on the engine"}},
		{"from-arg", build("ARG X\nFROM $X\n"), []string{"FROM $X", "variable"}},
		{"copy-from-missing", build("FROM patina/base:bookworm\nCOPY --from=" + missing + " /etc/passwd /p\n"), []string{missing, "not on the engine"}},
		{"image-missing", map[string]string{".devcontainer.json": `{"image": "` + missing + `"}`}, []string{missing, "not on the engine"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := GitRepo(t, tc.files)
			_, err := h.Client.CreateWorkspace(ctx, client.CreateWorkspaceRequest{Name: "hostile-" + tc.name, Repo: repo})
			if !IsCode(err, client.CodeInvalid) {
				t.Fatalf("create: %v, want a 400", err)
			}
			t.Logf("refused: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("create: %v, want it to say %q", err, w)
				}
			}
			if _, err := h.Client.GetWorkspace(ctx, "hostile-"+tc.name); !IsCode(err, client.CodeNotFound) {
				t.Fatalf("a refused create left a workspace: %v", err)
			}
			if _, err := h.Client.BuildTemplate(ctx, client.BuildTemplateRequest{Repo: repo}); !IsCode(err, client.CodeInvalid) {
				t.Fatalf("template build: %v, want a 400", err)
			}
			// Nothing was pulled: the missing image is still missing.
			if _, err := dc.ImageInspect(ctx, missing); err == nil {
				t.Fatalf("image %s appeared on the engine", missing)
			}
		})
	}
}
