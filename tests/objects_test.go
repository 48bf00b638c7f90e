package tests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dockerclient "github.com/docker/docker/client"

	"github.com/patina-dev/patina/sidecar/client"
)

// marker is a random string that appears nowhere until a test writes it.
func marker(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// huntScript runs in a workspace as an attacker would: round after round,
// until /tmp/stop appears or the time is up, it copies every object
// directory and every import quarantine it can find under every mount
// point, every alternates entry and /.patina/repo, and dumps every object
// in each (git cat-file --batch-all-objects --batch) into /tmp/loot.
const huntScript = `n=0; end=$((SECONDS + 120))
while [ ! -e /tmp/stop ] && [ $SECONDS -lt $end ]; do
  n=$((n + 1))
  { awk '{print $5}' /proc/self/mountinfo; cat /workspace/.git/objects/info/alternates; ls -d /.patina/repo/* /.patina/repo/objects/*; } 2>/dev/null | sort -u |
  while read -r d; do
    case "$d" in /|/proc*|/sys*|/dev*|/workspace|/.patina/bin*|/.patina/state*|/etc/*|/tmp*) continue;; esac
    [ -d "$d" ] || continue
    find "$d" -maxdepth 4 -type d \( -name 'patina-incoming-*' -o -name pack \) 2>/dev/null | while read -r p; do
      o=${p%/pack}
      echo "$o" >> /tmp/dirs
      dst=/tmp/loot/$n$(printf %s "$o" | tr / _)
      cp -a "$o" "$dst" 2>/dev/null
      GIT_DIR=/tmp/hunt.git GIT_OBJECT_DIRECTORY="$o" git cat-file --batch-all-objects --batch >"$dst.cat" 2>/dev/null
    done
  done
done
echo "rounds $n"`

// quarantineScript copies, as fast as it can, whatever import quarantine
// (patina-incoming-*) appears in any object directory the hunt found.
const quarantineScript = `n=0; i=0; end=$((SECONDS + 120)); dirs=
while [ ! -e /tmp/stop ] && [ $SECONDS -lt $end ]; do
  if [ $((i % 200)) = 0 ]; then dirs=$(sort -u /tmp/dirs 2>/dev/null | grep -v patina-incoming); fi
  i=$((i + 1))
  for d in $dirs /.patina/repo/objects; do
    for q in "$d"/patina-incoming-*; do
      [ -d "$q" ] && cp -a "$q" /tmp/loot/q$((n += 1)) 2>/dev/null
    done
  done
done
echo "copies $n"`

// indexScript indexes every pack the hunt copied (thin ones completed from
// every object directory it found) and dumps every object in them.
const indexScript = `alts=$(sort -u /tmp/dirs 2>/dev/null | grep -v patina-incoming | tr '\n' :)
find /tmp/loot -name '*.pack' | while read -r p; do
  GIT_DIR=/tmp/hunt.git GIT_ALTERNATE_OBJECT_DIRECTORIES="$alts" git index-pack --stdin --fix-thin <"$p" >/dev/null 2>&1
done
GIT_DIR=/tmp/hunt.git git cat-file --batch-all-objects --batch >/tmp/loot/indexed.cat 2>/dev/null; true`

// A second workspace of the same repository hunts the first's objects,
// notes and import quarantines while the first works, takes diffs and
// commits a secret.env: it never sees the secret, the text of the first's
// commands (its log notes) or its uncommitted files. It does see its own
// base's objects: the hunt worked.
func TestHostileObjectsOfAnotherWorkspace(t *testing.T) {
	h := Start(t)
	ctx := context.Background()
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "victim", Repo: repo})
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "hunter", Repo: repo})
	// wip is committed with the secret in the end; inflight never is: it
	// only ever travels to the host in a diff's quarantine.
	secret, cmdText, wip, inflight := marker("SECRET"), marker("CMDTEXT"), marker("UNCOMMITTED"), marker("INFLIGHT")

	h.Out("hunter", "default", "mkdir -p /tmp/loot && git init -q --bare /tmp/hunt.git")
	var hunts []string
	for sid, script := range map[string]string{"hunt": huntScript, "quarantines": quarantineScript} {
		h.CreateSession("hunter", client.CreateSessionRequest{ID: sid})
		id, err := h.Client.Start(ctx, "hunter", sid, client.ExecRequest{Command: script})
		if err != nil {
			t.Fatal(err)
		}
		hunts = append(hunts, sid+":"+id)
	}
	// The victim at work: uncommitted files (given on stdin, so that no
	// command's text holds them) and diffs in progress, a command whose
	// text is logged, a committed secret.env, more diffs.
	stdin := func(cmd, in string) {
		t.Helper()
		res := h.ExecReq("victim", "default", client.ExecRequest{Command: cmd, Stdin: &in})
		if res.ExitCode != 0 {
			t.Fatalf("%s: %+v", cmd, res)
		}
	}
	stdin("cat > wip.txt", "work in progress "+wip+"\n")
	diffs := func(n int, file, text string) {
		for i := 0; i < n; i++ {
			stdin("cat >> "+file, "more "+text+"\n")
			if _, err := h.Client.Diff(ctx, "victim"); err != nil {
				t.Fatalf("diff: %v", err)
			}
		}
	}
	diffs(10, "wip.txt", wip)
	h.Out("victim", "default", "echo "+cmdText+" >/dev/null")
	stdin("cat > secret.env", "TOKEN="+secret+"\n")
	if cr, err := h.Client.Commit(ctx, "victim", client.CommitRequest{Message: "add secret.env"}); err != nil || !cr.Committed {
		t.Fatalf("commit: %+v %v", cr, err)
	}
	if got := gitIn(t, repo, "show", "refs/heads/patina/victim:secret.env"); !strings.Contains(got, secret) {
		t.Fatalf("exp the victim's secret recorded in the user's repository, got %q", got)
	}
	diffs(20, "wip2.txt", inflight)
	time.Sleep(time.Second) // a last round of the hunt
	h.Out("hunter", "default", "touch /tmp/stop")
	for _, sc := range hunts {
		sid, id, _ := strings.Cut(sc, ":")
		res, err := h.Client.Wait(ctx, "hunter", sid, id)
		if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("the hunt %s: %+v %v", sid, res, err)
		}
	}
	h.Out("hunter", "default", indexScript)
	t.Logf("the hunt took %s files", strings.TrimSpace(h.Out("hunter", "default", "set -- /tmp/loot/*; echo $#")))

	// It found and read its own base's objects...
	if got := h.Out("hunter", "default", "grep -rlaF 'initial' /tmp/loot | wc -l"); strings.TrimSpace(got) == "0" {
		t.Fatalf("the hunt read no object at all: its own base's commit is not in its loot")
	}
	// ...and nothing of the victim's (the markers go on stdin: the
	// hunter's own command texts, logged as notes, hold none).
	markers := secret + "\n" + cmdText + "\n" + wip + "\n" + inflight + "\n"
	found := h.ExecReq("hunter", "default", client.ExecRequest{Command: "grep -rlaF -f /dev/stdin /tmp/loot; grep -rhoaF -f /dev/stdin /tmp/loot | sort -u", Stdin: &markers})
	if found.Stdout != "" {
		t.Fatalf("the hunter saw the victim's secret, command text or uncommitted files:\n%s", found.Stdout)
	}
}

// A branch of the user's that is not an ancestor of the workspace's base,
// and what the user commits after the workspace was made: their objects
// cannot be read in the workspace, under any path it can see.
func TestHostileOtherBranchUnreadable(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	git := func(args ...string) string {
		t.Helper()
		return strings.TrimSpace(gitIn(t, repo, append([]string{"-c", "user.name=u", "-c", "user.email=u@u"}, args...)...))
	}
	git("checkout", "-q", "-b", "feature")
	if err := os.WriteFile(filepath.Join(repo, "feature.txt"), []byte(marker("FEATURE")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "feature.txt")
	git("commit", "-q", "-m", "feature only")
	git("tag", "-a", "-m", "a tag on the feature", "v-feature")
	git("checkout", "-q", "main")
	blob, commit, tag := git("rev-parse", "feature:feature.txt"), git("rev-parse", "feature"), git("rev-parse", "v-feature")
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "narrow", Repo: repo})
	if err := os.WriteFile(filepath.Join(repo, "later.txt"), []byte("later\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "later.txt")
	git("commit", "-q", "-m", "after the workspace")
	later := git("rev-parse", "main")

	ids := blob + "\n" + commit + "\n" + tag + "\n" + later + "\n"
	// Its own repository, then every object directory it can name.
	res := h.ExecReq("narrow", "default", client.ExecRequest{Command: `while read -r id; do git cat-file -e "$id" 2>/dev/null && echo "readable: $id"; done; true`, Stdin: &ids})
	if res.ExitCode != 0 || res.Stdout != "" {
		t.Fatalf("objects outside the base's history are readable in the workspace: %+v", res)
	}
	res = h.ExecReq("narrow", "default", client.ExecRequest{Command: `git init -q --bare /tmp/probe.git
for d in $(cat /workspace/.git/objects/info/alternates) $(awk '{print $5}' /proc/self/mountinfo) /.patina/repo/*; do
  [ -d "$d" ] && GIT_DIR=/tmp/probe.git GIT_OBJECT_DIRECTORY="$d" git cat-file --batch-all-objects --batch-check='%(objectname)' 2>/dev/null
done | grep -xF -f /dev/stdin; true`, Stdin: &ids})
	if res.ExitCode != 0 || res.Stdout != "" {
		t.Fatalf("objects outside the base's history are in an object directory the workspace sees: %+v", res)
	}
	if got := h.Out("narrow", "default", "git log --format=%s; cat a.txt"); got != "initial\na\n" {
		t.Fatalf("the workspace's own history: %q", got)
	}
}

// The workspace's git works on its own objects: the base's whole history
// (log, blame, an older commit checked out), gc inside, commits, diff,
// commit and merge through the API, a fork, a workspace of a later base
// (whose objects extend the first's), and a start after the sidecar's
// restart with its stores removed.
func TestWorkspaceGitOnOwnObjects(t *testing.T) {
	h := Start(t)
	ctx := context.Background()
	repo := GitRepo(t, map[string]string{"a.txt": "one\n"})
	commit := func(name, content, msg string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		gitIn(t, repo, "add", name)
		gitIn(t, repo, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-q", "-m", msg)
	}
	commit("a.txt", "one\ntwo\n", "second")
	commit("b.txt", "b\n", "third")
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "hist", Repo: repo})
	if got := h.Out("hist", "default", `set -e
git log --format=%s
git blame -s a.txt | wc -l
git checkout -q HEAD~2 && cat a.txt && git checkout -q patina/hist
git gc -q --prune=now && git fsck --connectivity-only --no-dangling && echo fsck-ok
echo more >> b.txt && git commit -qam inside && git log --format=%s -1`); got != "third\nsecond\ninitial\n2\none\nfsck-ok\ninside\n" {
		t.Fatalf("git inside: %q", got)
	}
	h.Out("hist", "default", "echo api > api.txt")
	d, err := h.Client.Diff(ctx, "hist")
	if err != nil || len(d.Files) != 2 {
		t.Fatalf("diff: %+v %v", d, err)
	}
	if cr, err := h.Client.Commit(ctx, "hist", client.CommitRequest{Message: "through the API"}); err != nil || !cr.Committed {
		t.Fatalf("commit: %+v %v", cr, err)
	}
	if mr, err := h.Client.Merge(ctx, "hist", client.MergeRequest{}); err != nil || !mr.FastForward {
		t.Fatalf("merge: %+v %v", mr, err)
	}
	if got := gitIn(t, repo, "log", "--format=%s", "-2", "main"); got != "through the API\ninside\n" {
		t.Fatalf("the user's main after the merge: %q", got)
	}

	// A fork starts at the source's recorded commit, with its history.
	if _, err := h.Client.ForkWorkspace(ctx, "hist", client.ForkWorkspaceRequest{Name: "hist-fork"}); err != nil {
		t.Fatal(err)
	}
	if got := h.Out("hist-fork", "default", "git log --format=%s | head -3; git fsck --connectivity-only --no-dangling && echo ok"); got != "through the API\ninside\nthird\nok\n" {
		t.Fatalf("the fork's history: %q", got)
	}
	// A workspace of the new main: its objects extend an earlier store.
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "later", Repo: repo})
	if got := h.Out("later", "default", "git log --format=%s | wc -l; cat api.txt; wc -l < .git/objects/info/alternates"); got != "5\napi\n2\n" {
		t.Fatalf("a workspace of a later base: %q", got)
	}

	// The sidecar goes; its stores are removed behind its back; the next
	// one makes them again as the workspaces start.
	for _, ws := range []string{"hist", "hist-fork", "later"} {
		if _, err := h.Client.StopWorkspace(ctx, ws); err != nil {
			t.Fatal(err)
		}
	}
	h.Kill9()
	if err := os.RemoveAll(filepath.Join(h.StateDir, "objects")); err != nil {
		t.Fatal(err)
	}
	h.Launch()
	for _, ws := range []string{"hist", "hist-fork", "later"} {
		WaitFor(t, ws+" adopted", time.Minute, func() bool {
			w, err := h.Client.GetWorkspace(ctx, ws)
			return err == nil && w.Status == client.StatusStopped
		})
		if _, err := h.Client.StartWorkspace(ctx, ws); err != nil {
			t.Fatalf("start %s after its stores were removed: %v", ws, err)
		}
		if got := h.Out(ws, "default", "git fsck --connectivity-only --no-dangling && git log --format=%s | tail -1"); got != "initial\n" {
			t.Fatalf("%s after its stores were made again: %q", ws, got)
		}
	}
	// Deleting every workspace removes every store.
	for _, ws := range []string{"hist", "hist-fork", "later"} {
		if err := h.Client.DeleteWorkspace(ctx, ws, client.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(h.StateDir, "objects", "*", "*")); len(ents) != 0 {
		t.Fatalf("stores left after every workspace was deleted: %v", ents)
	}
}

// beforeStores is the last patina whose workspaces mounted the user's
// whole object directory.
const beforeStores = "c6839ff"

// A workspace made by the patina before object stores (its container
// mounts the user's whole object directory) keeps working when adopted
// running, says so, and moves at its next start: a new container from its
// committed one (what it installed kept), its files, commits and
// uncommitted work kept, and only its base's objects readable.
func TestWorkspaceBeforeStoresMoves(t *testing.T) {
	RequireDocker(t)
	oldBin := binaryAt(t, beforeStores)
	stateDir, token := t.TempDir(), "stores-"+fmt.Sprint(time.Now().UnixNano())
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	gitIn(t, repo, "checkout", "-q", "-b", "other")
	if err := os.WriteFile(filepath.Join(repo, "other.txt"), []byte(marker("OTHER")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, repo, "add", "other.txt")
	gitIn(t, repo, "commit", "-q", "-m", "other")
	gitIn(t, repo, "checkout", "-q", "main")
	otherBlob := strings.TrimSpace(gitIn(t, repo, "rev-parse", "other:other.txt"))

	old := StartOld(t, oldBin, stateDir, token)
	oc := old.Client
	ctx := context.Background()
	ws, err := oc.CreateWorkspace(ctx, client.CreateWorkspaceRequest{Name: "before", Repo: repo})
	if err != nil {
		t.Fatalf("old sidecar: create: %v\n%s", err, old.Logs())
	}
	res, err := oc.Exec(ctx, "before", "default", client.ExecRequest{Command: "echo kept > /usr/local/share/installed && echo c > c.txt && git add c.txt && git commit -qm inside && echo wip >> a.txt && git cat-file -e " + otherBlob})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("old sidecar: exec (the other branch's blob must be readable there): %+v %v", res, err)
	}
	old.Stop(t)

	h := StartIn(t, stateDir, token, nil)
	WaitFor(t, "the workspace adopted", time.Minute, func() bool {
		w, err := h.Client.GetWorkspace(ctx, "before")
		return err == nil && w.Status == client.StatusRunning
	})
	w, _ := h.Client.GetWorkspace(ctx, "before")
	if !strings.Contains(w.Notice, "stop and start it") {
		t.Fatalf("exp the adopted workspace told of its old mounts, got notice %q", w.Notice)
	}
	if got := h.Out("before", "default", "git log --format=%s -1"); got != "inside\n" {
		t.Fatalf("the running old workspace: %q", got)
	}
	if _, err := h.Client.StopWorkspace(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	if w, err = h.Client.StartWorkspace(ctx, "before"); err != nil {
		t.Fatalf("start: %v\n%s", err, lastLines(h.Logs(), 30))
	}
	if w.ContainerID == ws.ContainerID || strings.Contains(w.Notice, "stop and start it") || w.Image != "patina/moved:"+w.ID {
		t.Fatalf("exp a new container from the committed one, got %+v", w)
	}
	if got := h.Out("before", "default", "cat /usr/local/share/installed c.txt; git log --format=%s; git status --short; grep -c ' /.patina/repo/objects ' /proc/self/mountinfo"); got != "kept\nc\ninside\ninitial\n M a.txt\n1\n" {
		t.Fatalf("the moved workspace: %q", got)
	}
	if res := h.Exec("before", "default", "git cat-file -e "+otherBlob); res.ExitCode == 0 {
		t.Fatal("the other branch's blob is still readable after the move")
	}
	if _, err := h.Client.Commit(ctx, "before", client.CommitRequest{Message: "wip"}); err != nil {
		t.Fatal(err)
	}
	if err := h.Client.DeleteWorkspace(ctx, "before", client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dc, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if _, err := dc.ImageInspect(ctx, "patina/moved:"+w.ID); err == nil {
		t.Fatal("the committed image outlived the workspace")
	}
	if ents, _ := filepath.Glob(filepath.Join(stateDir, "objects", "*", "*")); len(ents) != 0 {
		t.Fatalf("stores left: %v", ents)
	}
}
