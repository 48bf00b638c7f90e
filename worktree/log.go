package worktree

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxMessageLen bounds one log message in bytes; longer ones are cut.
const maxMessageLen = 2048

// AppendLog appends events to a workspace's log note, in one note write.
// Kind must match [a-z][a-z0-9_-]*; the message is flattened to one line.
func (r *Repo) AppendLog(ctx context.Context, nameOrID string, evs ...Event) error {
	for _, ev := range evs {
		if err := validateKind(ev.Kind); err != nil {
			return fmt.Errorf("append log %s: %w", nameOrID, err)
		}
	}
	if len(evs) == 0 {
		return nil
	}
	unlock, err := r.lock.lock(ctx)
	if err != nil {
		return fmt.Errorf("append log %s: %w", nameOrID, err)
	}
	defer unlock()
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return fmt.Errorf("append log %s: %w", nameOrID, err)
	}
	if err := r.appendEvent(ctx, ws.Anchor, evs...); err != nil {
		return fmt.Errorf("append log %s: %w", nameOrID, err)
	}
	return nil
}

// Log returns a workspace's log, oldest first. Lines that are not in
// patina's format (someone edited the note) come back with only Message set.
func (r *Repo) Log(ctx context.Context, nameOrID string) ([]Event, error) {
	ws, err := r.lookup(ctx, nameOrID)
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", nameOrID, err)
	}
	text, err := r.readNote(ctx, LogNotesRef, ws.Anchor)
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", nameOrID, err)
	}
	return parseLog(text), nil
}

// withNow is e with Time set to now if it is zero.
func (e Event) withNow() Event {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	return e
}

// String formats an event as its log line:
//
//	2025-11-21T05:00:00Z command (exit 0): go test ./...
//
// that is: RFC 3339 UTC time, kind, "(exit N)" for commands that have an
// exit code, and ": message" unless the message is empty.
func (e Event) String() string {
	var b strings.Builder
	b.WriteString(e.Time.UTC().Format(time.RFC3339))
	b.WriteByte(' ')
	b.WriteString(e.Kind)
	if e.ExitCode != nil {
		fmt.Fprintf(&b, " (exit %d)", *e.ExitCode)
	}
	if msg := oneLine(e.Message); msg != "" {
		b.WriteString(": ")
		b.WriteString(msg)
	}
	return b.String()
}

// oneLine turns control characters (newlines included) into spaces, trims
// and cuts to maxMessageLen, so a message is one stable line of a note.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' || r == '\u0085' {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > maxMessageLen {
		cut := maxMessageLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// parseLog parses a log note written by Event.String.
func parseLog(text string) []Event {
	var events []Event
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		events = append(events, parseEvent(line))
	}
	return events
}

func parseEvent(line string) Event {
	raw := Event{Message: line}
	ts, rest, ok := strings.Cut(line, " ")
	if !ok {
		return raw
	}
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return raw
	}
	head, msg, _ := strings.Cut(rest, ": ")
	kind, exit, hasExit := strings.Cut(head, " ")
	if validateKind(kind) != nil {
		return raw
	}
	ev := Event{Time: t, Kind: kind, Message: msg}
	if hasExit {
		n, ok := strings.CutPrefix(exit, "(exit ")
		n, ok2 := strings.CutSuffix(n, ")")
		code, err := strconv.Atoi(n)
		if !ok || !ok2 || err != nil {
			return raw
		}
		ev.ExitCode = &code
	}
	return ev
}
