package worktree

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestErrorTypes(t *testing.T) {
	t.Parallel()
	files := make([]string, 25)
	for i := range files {
		files[i] = fmt.Sprintf("f%02d", i)
	}
	fe := &FilesError{Kind: ErrConflict, Op: "merge patina/x into refs/heads/main", Files: files, Detail: "nothing was changed"}
	err := fmt.Errorf("merge x: %w", fe)
	if !errors.Is(err, ErrConflict) || errors.Is(err, ErrDirty) {
		t.Fatalf("exp ErrConflict only, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"merge x: merge patina/x into refs/heads/main: worktree: conflict: f00, f01", "f19 and 5 more; nothing was changed"} {
		if !strings.Contains(msg, want) {
			t.Errorf("exp %q in %q", want, msg)
		}
	}
	ne := &NameError{What: "workspace name", Name: "-x", Rule: ruleLeadingDash}
	if exp, got := `worktree: invalid workspace name "-x": starts with '-'`, ne.Error(); exp != got {
		t.Errorf("exp %q, got %q", exp, got)
	}
	ge := &GitError{Args: []string{"notes", "show"}, ExitCode: 1, Stderr: "error: no note found for object abc.\n", kind: classify("error: no note found for object abc.")}
	if !errors.Is(ge, ErrNotFound) {
		t.Errorf("exp GitError to unwrap to ErrNotFound")
	}
	if exp, got := "git notes show: exit status 1: error: no note found for object abc.", ge.Error(); exp != got {
		t.Errorf("exp %q, got %q", exp, got)
	}
}
