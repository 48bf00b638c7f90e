package workspace

import (
	"errors"
	"fmt"
	"testing"

	"github.com/patina-dev/patina/session"
)

// A file the agent did not find is said in the user's terms, as the
// domain's ErrNotFound; a missing workspace, and other failures, stay as
// they are.
func TestFileError(t *testing.T) {
	noWorkspace := fmt.Errorf("%w: workspace w", ErrNotFound)
	other := errors.New("boom")
	cases := []struct {
		name string
		err  error
		exp  string
	}{
		{"missing file", fmt.Errorf("%w: openat d/x.txt: no such file or directory", session.ErrNotFound), "not found: no file or directory /workspace/d/x.txt in workspace w"},
		{"missing workspace", noWorkspace, noWorkspace.Error()},
		{"other", other, "boom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := fileError(c.err, "w", "/d/x.txt/")
			if got.Error() != c.exp {
				t.Fatalf("exp %q, got %q", c.exp, got.Error())
			}
			if c.name != "other" && Kind(got) != ErrNotFound {
				t.Fatalf("exp kind ErrNotFound, got %v", Kind(got))
			}
		})
	}
	if fileError(nil, "w", "x") != nil {
		t.Fatal("exp nil for nil")
	}
}
