package worktree

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The workspace is hostile: whatever runs in it is root in its container
// and can do anything to /workspace, its .git included. In this simulation
// the user's objects are the workspace's alternates; in a container they
// are mounted read-only and nothing else of the user's repository is
// there at all (so `git push <user repo>` from inside has nowhere to go;
// here the path exists, so TestHostNeverReadsWorkspace shows instead that
// the host side never needs the workspace's files).
func TestHostileWorkspace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// script runs with bash in the workspace; $MARK is a file that
		// must never appear (a command run on the host would create it).
		script string
	}{
		{"delete-refs", `git update-ref -d refs/heads/main; git update-ref -d HEAD; git update-ref -d "$(git symbolic-ref HEAD)"; rm -f .git/packed-refs; rm -rf .git/refs/heads/*`},
		{"delete-objects", `rm -rf .git/objects/pack/* .git/objects/??`},
		{"gc", `git gc -q --prune=now --aggressive`},
		{"reflog-expire", `git reflog expire --expire=now --all`},
		{"rewrite-history", `git reset -q --hard HEAD~1 && git commit -q --allow-empty -m rewritten`},
		{"config-filters-hooks", `
			echo '* filter=evil diff=evil merge=evil' > .gitattributes
			git config filter.evil.clean 'touch $MARK; cat'
			git config filter.evil.smudge 'touch $MARK; cat'
			git config diff.evil.textconv 'touch $MARK; cat'
			git config merge.evil.driver 'touch $MARK; true'
			git config core.fsmonitor 'touch $MARK; true'
			git config core.hooksPath hooks
			mkdir -p hooks .git/hooks
			for h in pre-commit post-commit post-checkout reference-transaction pre-push; do
				printf '#!/bin/sh\ntouch %s\n' "$MARK" | tee hooks/$h > .git/hooks/$h
				chmod +x hooks/$h .git/hooks/$h
			done
			git config --add safe.directory '*'`},
		{"alternates-elsewhere", `echo / > .git/objects/info/alternates; echo /etc >> .git/objects/info/alternates`},
		{"symlinks-and-fifos", `
			n=0
			find .git -type f | while read -r f; do
				n=$((n+1))
				rm -f "$f"
				case $((n % 3)) in
				0) mkfifo "$f" ;;
				1) ln -s "$USER_GIT/config" "$f" ;;
				2) ln -s /dev/zero "$f" ;;
				esac
			done`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := newUserRepo(t)
			gitT(t, repo, "branch", "review")
			r := openRepo(t, repo)
			ws := mustCreate(t, r, CreateRequest{Name: "hostile"})
			in := newInside(t, ws)
			agentCommit(t, r, ws, in, map[string]string{"one.txt": "one\n"})
			writeFile(t, filepath.Join(in.Dir, "two.txt"), "two\n")
			gitT(t, in.Dir, "add", "two.txt")
			gitT(t, in.Dir, "commit", "-q", "-m", "two")
			writeFile(t, filepath.Join(in.Dir, "three.txt"), "uncommitted\n")
			st := mustState(t, in)
			skip := []string{"refs/heads/patina/", "refs/notes/patina-", "refs/heads/review"}
			before := snapshotRepo(t, repo, skip...)
			mark := filepath.Join(tempDir(t), "pwned")

			ctx, cancel := context.WithTimeout(testCtx(t), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", tc.script)
			cmd.Dir = in.Dir
			cmd.Env = append(os.Environ(), "MARK="+mark, "USER_GIT="+filepath.Join(repo, ".git"),
				"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Logf("script: %v: %s", err, out)
			}

			// The host's operations, through the agent's pack stream (of
			// the state taken before the script: State runs the
			// workspace's own filters, which is its business). Each either
			// works or fails cleanly, within its deadline.
			src := insideSource{in}
			step := func(name string, f func(ctx context.Context) error) {
				ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
				defer cancel()
				start := time.Now()
				err := f(ctx)
				t.Logf("%s: %v (%v)", name, err, time.Since(start).Round(time.Millisecond))
				if time.Since(start) > 15*time.Second {
					t.Errorf("%s took %v", name, time.Since(start))
				}
			}
			step("record", func(ctx context.Context) error {
				_, err := r.Record(ctx, "hostile", RecordRequest{Head: st.Head, Source: src})
				return err
			})
			step("diff", func(ctx context.Context) error {
				_, err := r.Diff(ctx, "hostile", DiffRequest{Head: st.Head, Snapshot: st.Snapshot, Source: src})
				return err
			})
			step("merge", func(ctx context.Context) error {
				_, err := r.Merge(ctx, "hostile", MergeRequest{Into: "review"})
				return err
			})
			step("apply", func(ctx context.Context) error {
				_, err := r.Apply(ctx, "hostile", ApplyRequest{Snapshot: st.Snapshot, Source: src})
				return err
			})

			wantSameRepo(t, before, snapshotRepoObjectsKept(t, repo, before, skip...))
			if _, err := os.Stat(mark); err == nil {
				t.Fatalf("the workspace's command ran")
			}
			// The branch, if it moved, is at a commit whose objects are all in
			// the user's repository.
			tip := gitT(t, repo, "rev-parse", "refs/heads/patina/hostile")
			if _, err := gitTry(repo, "rev-list", "--objects", "--quiet", tip); err != nil {
				t.Fatalf("branch at %s, not complete: %v", tip, err)
			}
		})
	}
}

// snapshotRepoObjectsKept is snapshotRepo, with the objects set replaced
// by before's if no object file was removed and no quarantine is left
// (imports that passed the checks add packs, Apply adds loose objects;
// fsck is checked either way).
func snapshotRepoObjectsKept(t *testing.T, repo string, before repoState, skip ...string) repoState {
	t.Helper()
	after := snapshotRepo(t, repo, skip...)
	seen := map[string]bool{}
	for _, o := range after.Objects {
		if strings.HasPrefix(o, quarantinePrefix) {
			return after
		}
		seen[o] = true
	}
	for _, o := range before.Objects {
		if !seen[o] {
			return after
		}
	}
	after.Objects = before.Objects
	return after
}

// The host side never needs the workspace's files: with the workspace's
// directory gone, Record, Diff, Merge and Apply work from the pack stream
// alone.
func TestHostNeverReadsWorkspace(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ctx := testCtx(t)
	ws := mustCreate(t, r, CreateRequest{Name: "remote"})
	in := newInside(t, ws)
	writeFile(t, filepath.Join(in.Dir, "committed.txt"), "committed\n")
	c, err := in.Commit(ctx, CommitRequest{})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(in.Dir, "uncommitted.txt"), "uncommitted\n")
	st := mustState(t, in)
	var pack bytes.Buffer
	if err := in.Pack(ctx, []string{st.Head, st.Snapshot}, []string{ws.BaseCommit}, &pack); err != nil {
		t.Fatal(err)
	}
	// Make the workspace unreadable in every way: gone.
	if err := os.RemoveAll(filepath.Dir(in.Dir)); err != nil {
		t.Fatal(err)
	}

	src := bytesSource(pack.Bytes())
	if _, err := r.Record(ctx, "remote", RecordRequest{Head: c.Commit, Source: src}); err != nil {
		t.Fatal(err)
	}
	d, err := r.Diff(ctx, "remote", DiffRequest{Head: st.Head, Snapshot: st.Snapshot, Source: src})
	if err != nil || len(d.Files) != 2 || !d.Uncommitted {
		t.Fatalf("exp two files, uncommitted, got %+v, %v", d, err)
	}
	if _, err := r.Merge(ctx, "remote", MergeRequest{Commit: d.Commit}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(ctx, "remote", ApplyRequest{Snapshot: st.Snapshot, Source: src}); err != nil {
		t.Fatal(err)
	}
	if exp, got := "A\tuncommitted.txt", gitT(t, repo, "diff", "--cached", "--name-status"); exp != got {
		t.Fatalf("exp the uncommitted file staged, got %q", got)
	}
}

// Nothing patina writes in the user's repository is a file a workspace
// could have planted: after everything, no symlink or FIFO anywhere in
// its git dir.
func TestNoLinksInUserGitDir(t *testing.T) {
	t.Parallel()
	repo := newUserRepo(t)
	r := openRepo(t, repo)
	ws := mustCreate(t, r, CreateRequest{Name: "links"})
	in := newInside(t, ws)
	agentCommit(t, r, ws, in, map[string]string{"a.txt": "a\n"})
	diffOf(t, r, ws, in)
	if _, err := r.Merge(testCtx(t), "links", MergeRequest{}); err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(filepath.Join(repo, ".git"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&(fs.ModeSymlink|fs.ModeNamedPipe|fs.ModeDevice) != 0 {
			t.Errorf("unexpected %v at %s", d.Type(), p)
		}
		return nil
	})
}
