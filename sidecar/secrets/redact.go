package secrets

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// MinRedacted is the shortest value taken out of text: a shorter one
// would match ordinary words. (Every value, whatever its length, is kept
// out of the API and of the container's configuration.)
const MinRedacted = 6

// Redacted is what stands for a value taken out.
const Redacted = "[redacted]"

// Redactor takes values that must not be shown (secrets, environment
// values marked secret) out of text: the sidecar's logs, the workspaces'
// event logs. Values are grouped by owner ("secret:GH", a workspace's
// id), replaced whole when the owner's values change.
type Redactor struct {
	mu     sync.Mutex
	owners map[string][]string
	rep    atomic.Pointer[strings.Replacer]
}

// NewRedactor returns a Redactor with nothing to take out.
func NewRedactor() *Redactor { return &Redactor{owners: map[string][]string{}} }

// Hide makes owner's values the ones values says (none: forget it).
func (r *Redactor) Hide(owner string, values []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var keep []string
	for _, v := range values {
		if len(v) >= MinRedacted {
			keep = append(keep, v)
		}
	}
	if len(keep) == 0 {
		delete(r.owners, owner)
	} else {
		r.owners[owner] = keep
	}
	var all []string
	for _, vs := range r.owners {
		all = append(all, vs...)
	}
	if len(all) == 0 {
		r.rep.Store(nil)
		return
	}
	// Longest first: of two values where one holds the other, the longer
	// is replaced whole.
	slices.SortFunc(all, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	all = slices.Compact(all)
	pairs := make([]string, 0, 2*len(all))
	for _, v := range all {
		pairs = append(pairs, v, Redacted)
	}
	r.rep.Store(strings.NewReplacer(pairs...))
}

// Redact returns s without the values it holds.
func (r *Redactor) Redact(s string) string {
	if r == nil {
		return s
	}
	rep := r.rep.Load()
	if rep == nil {
		return s
	}
	return rep.Replace(s)
}

// Handler wraps h so that no record it handles holds a value: in its
// message or in any attribute (errors and other values as they print).
func (r *Redactor) Handler(h slog.Handler) slog.Handler { return &redactHandler{h: h, r: r} }

type redactHandler struct {
	h slog.Handler
	r *Redactor
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	if h.r.rep.Load() == nil {
		return h.h.Handle(ctx, rec)
	}
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.Redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, ga := range g {
			out[i] = h.attr(ga)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		s := fmt.Sprint(v.Any())
		if r := h.r.Redact(s); r != s {
			return slog.String(a.Key, r)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (h *redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = h.attr(a)
	}
	return &redactHandler{h: h.h.WithAttrs(out), r: h.r}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{h: h.h.WithGroup(name), r: h.r}
}

// secretValues are the texts of a secret that are taken out: its value
// and, for "Scheme credentials" ("Bearer …", "token …"), the credentials
// alone.
func secretValues(s Secret) []string {
	vals := []string{s.Value}
	if _, cred, ok := strings.Cut(s.Value, " "); ok {
		vals = append(vals, strings.TrimSpace(cred))
	}
	return vals
}
