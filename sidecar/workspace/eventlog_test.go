package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/patina-dev/patina/worktree"
)

func TestFileSinkStaysBounded(t *testing.T) {
	f := fileSink{path: filepath.Join(t.TempDir(), "log.jsonl"), max: 16 << 10}
	ctx := context.Background()
	for i := 0; i < 2000; i++ {
		if err := f.append(ctx, []worktree.Event{{Kind: "command", Message: fmt.Sprintf("echo %d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(f.path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 16<<10 {
		t.Fatalf("exp the log within 16 KiB, got %d bytes", fi.Size())
	}
	evs, err := f.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := "trimmed", evs[0].Kind; exp != got {
		t.Fatalf("exp the first event to say what was dropped, got %q", got)
	}
	if exp, got := "echo 1999", evs[len(evs)-1].Message; exp != got {
		t.Fatalf("exp the newest event kept: exp %q, got %q", exp, got)
	}
}
