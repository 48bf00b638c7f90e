package worktree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The two notes refs patina keeps in the user's repository. Both annotate
// a workspace's initial commit (Workspace.Commit).
const (
	// StateNotesRef holds one JSON document per workspace, written whole.
	StateNotesRef = "refs/notes/patina-state"
	// LogNotesRef holds one human-readable line per event, appended; read it
	// with `git notes --ref patina-log show <commit>`.
	LogNotesRef = "refs/notes/patina-log"
)

// stateVersion is the version of the state note format written.
const stateVersion = 1

// state is the JSON state note. Path is not stored: a worktree's location
// is git's business (git worktree list) and differs between machines.
type state struct {
	Version    int             `json:"version"`
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	Branch     string          `json:"branch"`
	BaseRef    string          `json:"base_ref"`
	BaseCommit string          `json:"base_commit"`
	CreatedAt  time.Time       `json:"created_at"`
	Image      string          `json:"image,omitempty"`
	Meta       json.RawMessage `json:"meta,omitempty"`
}

// noteState is a parsed state note and the commit it annotates.
type noteState struct {
	commit string
	st     state
}

// stateOf is the state note content for ws.
func stateOf(ws Workspace) state {
	return state{
		Version:    stateVersion,
		ID:         ws.ID,
		Name:       ws.Name,
		Branch:     ws.Branch,
		BaseRef:    ws.BaseRef,
		BaseCommit: ws.BaseCommit,
		CreatedAt:  ws.CreatedAt,
		Image:      ws.Image,
		Meta:       ws.Meta,
	}
}

// parseState decodes and checks a state note. Notes travel with
// repositories, so their content is outside input: a name that would not
// pass ValidateName never becomes a path or a ref.
func parseState(b []byte) (state, error) {
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("state note: %w", err)
	}
	if err := ValidateName(st.Name); err != nil {
		return st, fmt.Errorf("state note: %w", err)
	}
	if !isUUID(st.ID) {
		return st, fmt.Errorf("state note: id %q is not a uuid", st.ID)
	}
	if !isHex(st.BaseCommit) {
		return st, fmt.Errorf("state note: base commit %q is not an object id", st.BaseCommit)
	}
	if len(st.Meta) > 0 && !json.Valid(st.Meta) {
		return st, fmt.Errorf("state note: meta is not valid JSON")
	}
	st.Branch = BranchPrefix + st.Name
	return st, nil
}

// readStates reads every state note of the repository. Notes that do not
// parse are logged and skipped, so one bad note hides one workspace, not
// all of them.
func (r *Repo) readStates(ctx context.Context) ([]noteState, error) {
	out, err := r.run(ctx, "notes", "--ref="+StateNotesRef, "list")
	if err != nil {
		return nil, fmt.Errorf("read state notes: %w", err)
	}
	byCommit := parseNotesList(out)
	blobIDs := make([]string, 0, len(byCommit))
	for _, blob := range byCommit {
		blobIDs = append(blobIDs, blob)
	}
	blobs, err := r.git.catBlobs(ctx, r.root, blobIDs)
	if err != nil {
		return nil, fmt.Errorf("read state notes: %w", err)
	}
	var states []noteState
	for commit, blob := range byCommit {
		st, err := parseState(blobs[blob])
		if err != nil {
			r.logger.Warn("skipping unreadable state note", "commit", commit, "err", err)
			continue
		}
		states = append(states, noteState{commit: commit, st: st})
	}
	return states, nil
}

// writeState writes the state note of commit, replacing any.
func (r *Repo) writeState(ctx context.Context, commit string, st state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("write state note: %w", err)
	}
	return r.writeNote(ctx, StateNotesRef, commit, append(b, '\n'))
}

// writeNote replaces the note of commit under ref with content. Callers
// hold the repository lock: notes refs are updated read-modify-write.
func (r *Repo) writeNote(ctx context.Context, ref, commit string, content []byte) error {
	_, err := r.git.run(ctx, gitCmd{
		dir:   r.root,
		args:  []string{"notes", "--ref=" + ref, "add", "-f", "-F", "-", commit},
		stdin: content,
	})
	if err != nil {
		return fmt.Errorf("write note %s on %s: %w", ref, commit, err)
	}
	return nil
}

// readNote returns the note of commit under ref, "" if there is none.
func (r *Repo) readNote(ctx context.Context, ref, commit string) (string, error) {
	out, err := r.git.run(ctx, gitCmd{dir: r.root, args: []string{"notes", "--ref=" + ref, "show", commit}})
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read note %s on %s: %w", ref, commit, err)
	}
	return string(out), nil
}

// removeNote removes the note of commit under ref, if any.
func (r *Repo) removeNote(ctx context.Context, ref, commit string) error {
	if _, err := r.run(ctx, "notes", "--ref="+ref, "remove", "--ignore-missing", commit); err != nil {
		return fmt.Errorf("remove note %s on %s: %w", ref, commit, err)
	}
	return nil
}

// appendEvent appends ev to the log note of commit. Callers hold the lock.
func (r *Repo) appendEvent(ctx context.Context, commit string, evs ...Event) error {
	old, err := r.readNote(ctx, LogNotesRef, commit)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(old)
	if old != "" && !strings.HasSuffix(old, "\n") {
		b.WriteByte('\n')
	}
	for _, ev := range evs {
		if ev.Time.IsZero() {
			ev.Time = time.Now()
		}
		b.WriteString(ev.String())
		b.WriteByte('\n')
	}
	return r.writeNote(ctx, LogNotesRef, commit, []byte(b.String()))
}

// logEvent appends ev to the log of a workspace after a change has been
// made: the change stands even if logging it fails, so a failure is only
// logged. (Context cancellation does not stop it.)
func (r *Repo) logEvent(ctx context.Context, ws Workspace, ev Event) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := r.appendEvent(ctx, ws.Commit, ev); err != nil {
		r.logger.Warn("append to workspace log", "workspace", ws.Name, "kind", ev.Kind, "err", err)
	}
}
