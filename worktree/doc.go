// Package worktree gives each patina workspace a branch of the user's
// repository and a repository of its own inside its container, with its
// state kept in git notes, so an agent's work is isolated, reviewable and
// can be merged back — and nothing in a workspace can harm the user's
// repository. It knows nothing of Docker, HTTP or sessions; it runs the git
// binary (2.38 or newer).
//
// The workspace is hostile: whatever runs inside is root in its container.
// Only patina writes the user's repository, on the host; the workspace's
// objects reach it as a pack stream that is quarantined and checked before
// anything moves, and host git never reads a file the workspace can write.
//
// # Host side: the user's repository
//
//	r, err := worktree.Open(ctx, worktree.Config{StateDir: dir, Logger: logger}, userRepoPath)
//	ws, err := r.Create(ctx, worktree.CreateRequest{Name: "fix-login", Base: "main", Image: img, Meta: meta})
//	list, err := r.List(ctx)                // every workspace, from the notes (legacy ones too)
//	ws, err = r.Get(ctx, "fix-login")       // by name, or by ID
//	ws, err = r.SetMeta(ctx, "fix-login", meta)
//	err = r.AppendLog(ctx, "fix-login", worktree.Event{Kind: worktree.EventCommand, Message: "go test ./...", ExitCode: &code})
//	events, err := r.Log(ctx, "fix-login")
//	rec, err := r.Record(ctx, "fix-login", worktree.RecordRequest{Head: st.Head, Source: src})
//	d, err := r.Diff(ctx, "fix-login", worktree.DiffRequest{Head: st.Head, Snapshot: st.Snapshot, Source: src})
//	m, err := r.Merge(ctx, "fix-login", worktree.MergeRequest{Commit: d.Commit}) // what was reviewed, into its base branch
//	a, err := r.Apply(ctx, "fix-login", worktree.ApplyRequest{Snapshot: st.Snapshot, Source: src})
//	err = r.Delete(ctx, "fix-login", worktree.DeleteRequest{KeepBranch: false})
//	ws, err = r.Migrate(ctx, "old-one")     // a legacy (format 1) workspace
//
// A workspace named <name> is branch patina/<name>, created at the base
// commit; its notes hang on an anchor blob of its own (Workspace.Anchor).
// Names are validated by ValidateName; an empty CreateRequest.Name gets the
// first 8 hex digits of the workspace's uuid. Every method that takes a
// workspace accepts its name or its ID. No host-side method takes a path to
// a workspace's files.
//
// A Source (declared here, implemented by the sidecar over the workspace's
// agent) sends packs: Record moves the branch to the workspace's HEAD once
// its objects pass the checks; Diff shows a snapshot against the base
// without writing anything; Merge merges what was last recorded,
// optionally pinned to the commit that was reviewed; Apply stages a
// snapshot in the user's working tree.
//
// # Inside: the workspace's own repository
//
//	in := &worktree.Inside{Dir: "/workspace"}
//	_, err := in.Init(ctx, worktree.InitRequest{Branch: ws.Branch, Base: ws.BaseCommit, Alternates: objectDirsInside})
//	st, err := in.State(ctx)                // HEAD, branch, snapshot of uncommitted work
//	c, err := in.Commit(ctx, worktree.CommitRequest{Message: "..."})
//	err = in.Pack(ctx, want, have, w)       // what a Source streams to the host
//
// The agent runs these in the container on /workspace: an ordinary
// repository whose objects/info/alternates borrow the user's objects,
// mounted read-only. git works there as in a clone.
//
// # State in git notes
//
// The JSON state note (refs/notes/patina-state, written whole) and the
// human-readable log (refs/notes/patina-log, one line appended per event)
// both annotate Workspace.Anchor, in the user's repository. A fresh Repo
// (a restarted sidecar) finds every workspace again with List. Notes are
// outside input: parsed defensively, and what they say is returned as a
// claim, never used as a path or mount. The log reads as plain git:
//
//	git notes --ref patina-log show <anchor>
//
// # What touches the user's working tree
//
// Only Merge (when the target branch is checked out) and Apply change a
// working tree or index of the user's; everything else works on refs,
// notes and objects. Both check first, in the object database, and refuse
// with ErrConflict or ErrDirty without changing anything. A repository with
// no commits yet cannot have workspaces (ErrUnsupported).
//
// # Errors
//
// Errors wrap the sentinels ErrNotFound, ErrExists, ErrInvalidName,
// ErrConflict, ErrDirty, ErrNoTarget, ErrUnsupported, ErrRejected and
// ErrTooLarge (test with errors.Is); a context's error is returned as
// such. *NameError says which naming rule failed, *FilesError lists the
// files of a conflict or of a dirty tree, and *GitError carries git's
// arguments, exit code and stderr.
//
// # Concurrency
//
// Every change to a repository (create, notes, record, merge, apply,
// migrate, delete) holds a per-repository lock: a semaphore shared by all
// Repo values of the process, then flock(2) on patina.lock in the common
// git dir, shared with other processes. Record and Apply read their pack
// before taking it. Reads (List, Get, Log, Diff) take no lock. Each method
// honours its context, also while waiting for the lock or for a Source.
//
// DESIGN.md in this directory has the layout, what is trusted, the
// quarantine import, the notes format, locking, the merge strategy and
// the migration of legacy workspaces.
package worktree
