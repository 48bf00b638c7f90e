package secrets

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// hides reports whether s is taken out of text.
func (r *Redactor) hides(s string) bool { return r.Redact(s) != s }

func TestRedact(t *testing.T) {
	r := NewRedactor()
	r.Hide("secret:A", []string{"Bearer tok-123456", "tok-123456"})
	r.Hide("ws1", []string{"hunter2-pass", "short"})
	for in, exp := range map[string]string{
		"Authorization: Bearer tok-123456!": "Authorization: [redacted]!",
		"token tok-123456":                  "token [redacted]",
		"pw=hunter2-pass&x=short":           "pw=[redacted]&x=short",
		"nothing here":                      "nothing here",
	} {
		if got := r.Redact(in); got != exp {
			t.Errorf("%q: exp %q, got %q", in, exp, got)
		}
	}
	r.Hide("ws1", nil)
	if r.hides("hunter2-pass") {
		t.Fatal("a forgotten owner's value is still redacted")
	}
	if !r.hides("tok-123456") {
		t.Fatal("forgetting one owner forgot another's values")
	}
}

// No log record holds a hidden value: message, attributes, errors,
// groups, attributes bound earlier.
func TestRedactHandler(t *testing.T) {
	r := NewRedactor()
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewTextHandler(&buf, nil)))
	const v = "s3cr3t-value"
	early := log.With("bound", "x")
	r.Hide("o", []string{v})
	log.Info("got "+v, "k", v, "err", errors.New("failed with "+v), slog.Group("g", "inner", "a "+v), "n", 3)
	early.Info("late", "k", []string{v})
	log.With("w", v).Info("bound")
	out := buf.String()
	if strings.Contains(out, v) {
		t.Fatalf("a hidden value reached the log:\n%s", out)
	}
	if strings.Count(out, Redacted) < 6 || !strings.Contains(out, "n=3") {
		t.Fatalf("exp the values replaced and the rest kept, got:\n%s", out)
	}
}
