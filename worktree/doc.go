// Package worktree gives each patina workspace a git branch and worktree of
// the user's repository, with its state kept in git notes, so an agent's
// work is isolated, reviewable and can be merged back. It knows nothing of
// Docker, HTTP or sessions; it runs the git binary (2.38 or newer).
//
// # Opening a repository
//
//	r, err := worktree.Open(ctx, worktree.Config{StateDir: dir, Logger: logger}, anyPathInsideRepo)
//
// Open accepts any path inside the repository (main working tree, a linked
// worktree, a workspace, or the git dir) and refuses bare repositories and
// a StateDir inside the working tree. One *Repo may be used from many
// goroutines; several Repo values and several processes may share a
// repository (see "Concurrency").
//
// # Workspaces
//
//	ws, err := r.Create(ctx, worktree.CreateRequest{Name: "fix-login", Base: "main", Image: img, Meta: meta})
//	list, err := r.List(ctx)                // every workspace, from the notes
//	ws, err = r.Get(ctx, "fix-login")       // by name, or by ID
//	ws, err = r.SetMeta(ctx, "fix-login", meta)
//	err = r.AppendLog(ctx, "fix-login", worktree.Event{Kind: worktree.EventCommand, Message: "go test ./...", ExitCode: &code})
//	events, err := r.Log(ctx, "fix-login")
//	d, err := r.Diff(ctx, "fix-login")      // against the base, uncommitted and untracked included
//	c, err := r.Commit(ctx, "fix-login", worktree.CommitRequest{Message: "..."})
//	m, err := r.Merge(ctx, "fix-login", worktree.MergeRequest{})  // into the branch it came from
//	a, err := r.Apply(ctx, "fix-login", worktree.ApplyRequest{})  // staged, uncommitted, in Root
//	ws, err = r.Repair(ctx, "fix-login")    // re-create a vanished worktree
//	err = r.Delete(ctx, "fix-login", worktree.DeleteRequest{KeepBranch: false})
//
// A workspace named <name> is branch patina/<name>, whose first commit is
// an empty commit of its own on top of the base (Workspace.Commit), checked
// out at <StateDir>/worktrees/<repo-key>/<name>. Names are validated by
// ValidateName; an empty CreateRequest.Name gets the first 8 hex digits of
// the workspace's uuid. Every method that takes a workspace accepts its
// name or its ID.
//
// # State in git notes
//
// The JSON state note (refs/notes/patina-state, written whole) and the
// human-readable log (refs/notes/patina-log, one line appended per event)
// both annotate Workspace.Commit, in the user's repository. A fresh Repo
// (a restarted sidecar) finds every workspace again with List; one whose
// worktree directory vanished has Missing set and can be repaired or
// deleted. The log reads as plain git:
//
//	git notes --ref patina-log show <commit>
//
// # What touches the user's working tree
//
// Only Merge (when the target branch is checked out) and Apply change a
// working tree or index of the user's; everything else works on refs,
// notes, objects and patina's own worktrees. Both check first, in the
// object database, and refuse with ErrConflict or ErrDirty without
// changing anything. Merge merges committed work only; Apply applies what
// Diff shows. A repository with no commits yet cannot have workspaces
// (ErrUnsupported).
//
// # Errors
//
// Errors wrap the sentinels ErrNotFound, ErrExists, ErrInvalidName,
// ErrConflict, ErrDirty, ErrMissing, ErrNoTarget and ErrUnsupported (test
// with errors.Is). *NameError says which naming rule failed, *FilesError
// lists the files of a conflict or of a dirty tree, and *GitError carries
// git's arguments, exit code and stderr.
//
// # Concurrency
//
// Every change to a repository (create, notes, commit, merge, apply,
// repair, delete) holds a per-repository lock: a semaphore shared by all
// Repo values of the process, then flock(2) on patina.lock in the common
// git dir, shared with other processes. Reads (List, Get, Log, Diff) take
// no lock. Each method honours its context, also while waiting for the
// lock.
//
// DESIGN.md in this directory has the layout on disk, the notes format,
// locking and the merge strategy.
package worktree
