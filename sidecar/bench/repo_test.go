package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeRepo: the files at the head, the history's size, and the same
// repository (the same commits) from the same seed.
func TestMakeRepo(t *testing.T) {
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	ctx := context.Background()
	head := func(dir string) string {
		out, err := exec.Command("git", "-C", dir, "rev-parse", "main").Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	var heads []string
	for i := 0; i < 2; i++ {
		dir := filepath.Join(t.TempDir(), "repo")
		if err := MakeRepo(ctx, RepoSpec{Dir: dir, Files: 120, HistoryBytes: 3 << 20, Seed: 7}); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("git", "-C", dir, "ls-files").Output()
		if err != nil || len(strings.Fields(string(out))) != 120 {
			t.Fatalf("exp 120 files at the head, got %d (%v)", len(strings.Fields(string(out))), err)
		}
		if st, _ := exec.Command("git", "-C", dir, "status", "--porcelain").Output(); len(st) != 0 {
			t.Fatalf("exp the files checked out, got status %q", st)
		}
		if n := RepoPackBytes(dir); n < 3<<20 || n > 4<<20 {
			t.Fatalf("exp about 3 MiB packed, got %d", n)
		}
		heads = append(heads, head(dir))
	}
	if heads[0] != heads[1] {
		t.Fatalf("exp the same seed to make the same repository, got %v", heads)
	}
}
