package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers and readers at once (run with -race): every write lands whole.
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("abc\n"))
				_, _ = b.WriteString("xy\n")
				_ = b.String()
			}
		})
	}
	wg.Wait()
	got := b.String()
	if a, x := strings.Count(got, "abc\n"), strings.Count(got, "xy\n"); a != 800 || x != 800 || len(got) != 800*7 {
		t.Fatalf("exp 800 of each line whole, got %d and %d in %d bytes", a, x, len(got))
	}
}
