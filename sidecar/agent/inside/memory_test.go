package inside

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFile is this process's file-backed resident memory (kB).
func rssFile(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// The executable's pages that a process touched leave its resident memory
// when released, and the process goes on (they come back on first touch).
func TestReleaseExecutablePages(t *testing.T) {
	before := rssFile(t)
	advised := releaseExecutablePages()
	after := rssFile(t)
	if advised <= 0 {
		t.Fatalf("no mapping of the executable was advised")
	}
	if after >= before {
		t.Fatalf("file-backed RSS %d kB before, %d kB after releasing", before, after)
	}
	t.Logf("file-backed RSS %d kB → %d kB (%d MB of mappings advised)", before, after, advised>>20)
	// Code runs again after its pages were dropped.
	if got := strings.Repeat("x", 3); got != "xxx" {
		t.Fatal(got)
	}
	if rssFile(t) <= 0 {
		t.Fatal("no file-backed pages came back")
	}
}
