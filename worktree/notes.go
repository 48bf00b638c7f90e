package worktree

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The two notes refs patina keeps in the user's repository. Both annotate
// a workspace's anchor (Workspace.Anchor).
const (
	// StateNotesRef holds one JSON document per workspace, written whole.
	StateNotesRef = "refs/notes/patina-state"
	// LogNotesRef holds one human-readable line per event, appended; read it
	// with `git notes --ref patina-log show <anchor>`.
	LogNotesRef = "refs/notes/patina-log"
)

// Bounds on notes, which are outside input.
const (
	maxStateNote = 1 << 20
	maxLogNote   = 64 << 20
	// maxLogKeep bounds what a log note keeps (trimLog).
	maxLogKeep = 1 << 20
)

// stateNote is the JSON state note. No path is stored: where a
// workspace's files live is the sidecar's business.
type stateNote struct {
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

// noteState is a parsed state note and the object it annotates.
type noteState struct {
	obj string
	st  stateNote
}

// stateOf is the state note content for ws.
func stateOf(ws Workspace) stateNote {
	return stateNote{
		Version:    ws.Format,
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
// repositories (and legacy workspaces could write them), so their content
// is outside input: a name that would not pass ValidateName never becomes
// a ref, an id must be a uuid, a base commit an object id.
func parseState(b []byte) (stateNote, error) {
	var st stateNote
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("state note: %w", err)
	}
	if st.Version != FormatLegacy && st.Version != FormatCurrent {
		return st, fmt.Errorf("state note: unknown version %d", st.Version)
	}
	if err := ValidateName(st.Name); err != nil {
		return st, fmt.Errorf("state note: %w", err)
	}
	if !isUUID(st.ID) {
		return st, fmt.Errorf("state note: id %q is not a uuid", st.ID)
	}
	if !isHex(st.BaseCommit) || len(st.BaseCommit) != 40 && len(st.BaseCommit) != 64 {
		return st, fmt.Errorf("state note: base commit %q is not an object id", st.BaseCommit)
	}
	if st.BaseRef != "" {
		if _, err := validateRef(st.BaseRef); err != nil {
			return st, fmt.Errorf("state note: base ref: %w", err)
		}
	}
	if len(st.Meta) > 0 && !json.Valid(st.Meta) {
		return st, fmt.Errorf("state note: meta is not valid JSON")
	}
	st.Branch = BranchPrefix + st.Name
	return st, nil
}

// readStates reads every state note of the repository that checks out
// (see readAllStates), one per workspace id: of two notes for one id, the
// format-2 one wins (a migration that crashed half way).
func (r *Repo) readStates(ctx context.Context) ([]noteState, error) {
	all, err := r.readAllStates(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]noteState{}
	for _, ns := range all {
		prev, ok := byID[ns.st.ID]
		if ok && (prev.st.Version > ns.st.Version || prev.st.Version == ns.st.Version && prev.obj < ns.obj) {
			continue
		}
		byID[ns.st.ID] = ns
	}
	states := make([]noteState, 0, len(byID))
	for _, ns := range byID {
		states = append(states, ns)
	}
	return states, nil
}

// readAllStates reads every state note that checks out: a format-2 note
// must annotate the anchor of its own id, a legacy note a commit. Notes
// that do not are logged and skipped, so one bad note hides one
// workspace, not all of them.
func (r *Repo) readAllStates(ctx context.Context) ([]noteState, error) {
	out, err := r.run(ctx, "notes", "--ref="+StateNotesRef, "list")
	if err != nil {
		return nil, fmt.Errorf("read state notes: %w", err)
	}
	byObj := parseNotesList(out)
	if len(byObj) == 0 {
		return nil, nil
	}
	var blobIDs []string
	for _, blob := range byObj {
		blobIDs = append(blobIDs, blob)
	}
	blobs, err := r.catBlobs(ctx, blobIDs, maxStateNote)
	if err != nil {
		return nil, fmt.Errorf("read state notes: %w", err)
	}
	var states []noteState
	var legacyObjs []string
	for obj, blob := range byObj {
		b, ok := blobs[blob]
		if !ok {
			r.logger.Warn("skipping unreadable state note", "object", obj, "err", "missing, not a blob, or larger than the limit")
			continue
		}
		st, err := parseState(b)
		if err == nil && !r.format.isOID(st.BaseCommit) {
			err = fmt.Errorf("state note: base commit %s is not an object id of this repository", st.BaseCommit)
		}
		if err == nil && st.Version == FormatCurrent && obj != r.format.anchorID(st.ID) {
			err = fmt.Errorf("state note: on %s, which is not the anchor of workspace %s", obj, st.ID)
		}
		if err != nil {
			r.logger.Warn("skipping unreadable state note", "object", obj, "err", err)
			continue
		}
		states = append(states, noteState{obj: obj, st: st})
		if st.Version == FormatLegacy {
			legacyObjs = append(legacyObjs, obj)
		}
	}
	if len(legacyObjs) == 0 {
		return states, nil
	}
	types, err := r.objectTypes(ctx, nil, legacyObjs)
	if err != nil {
		return nil, fmt.Errorf("read state notes: %w", err)
	}
	kept := states[:0]
	for _, ns := range states {
		if ns.st.Version == FormatLegacy && types[ns.obj] != "commit" {
			r.logger.Warn("skipping legacy state note not on a commit", "object", ns.obj, "type", types[ns.obj])
			continue
		}
		kept = append(kept, ns)
	}
	return kept, nil
}

// catBlobs reads blobs by id in one `git cat-file --batch`, after a
// `--batch-check` that leaves out missing ones, non-blobs and blobs larger
// than max.
func (r *Repo) catBlobs(ctx context.Context, ids []string, max int64) (map[string][]byte, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	c := r.cmd(nil, "cat-file", "--batch-check")
	c.stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
	out, err := r.git.run(ctx, c)
	if err != nil {
		return nil, err
	}
	var want []string
	var total int64
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[1] != "blob" {
			continue
		}
		n, err := parseSize(f[2])
		if err != nil || n > max {
			continue
		}
		want = append(want, f[0])
		total += n + int64(len(line)) + 2
	}
	if len(want) == 0 {
		return map[string][]byte{}, nil
	}
	c = r.cmd(nil, "cat-file", "--batch")
	c.stdin = strings.NewReader(strings.Join(want, "\n") + "\n")
	c.limit = total + 1024
	out, err = r.git.run(ctx, c)
	if err != nil {
		return nil, err
	}
	return parseCatFileBatch(out)
}

// writeState writes the state note of ws, replacing any. A format-2
// workspace's anchor is written again first (which also freshens it, so
// gc keeps it while the workspace is in use; see DESIGN.md).
func (r *Repo) writeState(ctx context.Context, ws Workspace) error {
	if ws.Format == FormatCurrent {
		if err := r.writeAnchor(ctx, ws.ID); err != nil {
			return err
		}
	}
	b, err := json.Marshal(stateOf(ws))
	if err != nil {
		return fmt.Errorf("write state note: %w", err)
	}
	return r.writeNote(ctx, StateNotesRef, ws.Anchor, append(b, '\n'))
}

// writeAnchor writes the anchor blob of workspace id and checks its name.
func (r *Repo) writeAnchor(ctx context.Context, id string) error {
	c := r.cmd(nil, "hash-object", "-w", "-t", "blob", "--stdin")
	c.stdin = bytes.NewReader(anchorContent(id))
	out, err := r.git.run(ctx, c)
	if err != nil {
		return fmt.Errorf("write anchor: %w", err)
	}
	if got, exp := strings.TrimSpace(string(out)), r.format.anchorID(id); got != exp {
		return fmt.Errorf("write anchor: git named it %s, expected %s", got, exp)
	}
	return nil
}

// writeNote replaces the note of obj under ref with content. Callers
// hold the repository lock: notes refs are updated read-modify-write.
func (r *Repo) writeNote(ctx context.Context, ref, obj string, content []byte) error {
	c := r.cmd(nil, "notes", "--ref="+ref, "add", "-f", "-F", "-", obj)
	c.stdin = bytes.NewReader(content)
	if _, err := r.git.run(ctx, c); err != nil {
		return fmt.Errorf("write note %s on %s: %w", ref, obj, err)
	}
	return nil
}

// readNote returns the note of obj under ref, "" if there is none.
func (r *Repo) readNote(ctx context.Context, ref, obj string) (string, error) {
	c := r.cmd(nil, "notes", "--ref="+ref, "show", obj)
	c.limit = maxLogNote
	out, err := r.git.run(ctx, c)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read note %s on %s: %w", ref, obj, err)
	}
	return string(out), nil
}

// removeNote removes the note of obj under ref, if any.
func (r *Repo) removeNote(ctx context.Context, ref, obj string) error {
	if _, err := r.run(ctx, "notes", "--ref="+ref, "remove", "--ignore-missing", obj); err != nil {
		return fmt.Errorf("remove note %s on %s: %w", ref, obj, err)
	}
	return nil
}

// appendEvent appends evs to the log note of obj. Callers hold the lock.
func (r *Repo) appendEvent(ctx context.Context, obj string, evs ...Event) error {
	old, err := r.readNote(ctx, LogNotesRef, obj)
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
	return r.writeNote(ctx, LogNotesRef, obj, []byte(trimLog(b.String(), maxLogKeep)))
}

// trimLog keeps a log's newest lines within max bytes: older ones are
// dropped, and a first line says how many. A workspace that runs commands
// for months keeps a log note of bounded size in the user's repository.
func trimLog(text string, max int) string {
	if len(text) <= max {
		return text
	}
	cut := len(text) - max/2 // keep the newest half, so trimming is rare
	if i := strings.IndexByte(text[cut:], '\n'); i >= 0 {
		cut += i + 1
	} else {
		cut = len(text)
	}
	dropped := strings.Count(text[:cut], "\n")
	head := Event{Time: time.Now(), Kind: "trimmed", Message: fmt.Sprintf("%d earlier events dropped: the log keeps its newest %d KiB", dropped, max>>10)}
	return head.String() + "\n" + text[cut:]
}

// logEvent appends ev to the log of a workspace after a change has been
// made: the change stands even if logging it fails, so a failure is only
// logged. (Context cancellation does not stop it.)
func (r *Repo) logEvent(ctx context.Context, ws Workspace, ev Event) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := r.appendEvent(ctx, ws.Anchor, ev); err != nil {
		r.logger.Warn("append to workspace log", "workspace", ws.Name, "kind", ev.Kind, "err", err)
	}
}
