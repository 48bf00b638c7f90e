package session

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// 8. Async exec: the id at once, status, reads by offset, live follow.
func TestAsyncAndFollow(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "async"})
	ctx := context.Background()
	id, err := s.Start(ctx, ExecRequest{Command: "for i in 1 2 3; do echo line$i; echo e$i >&2; sleep 0.2; done; exit_code=4; (exit 4)"})
	if err != nil {
		t.Fatal(err)
	}
	ci, err := s.Command(id)
	if err != nil || ci.State != CommandRunning || ci.Command == "" {
		t.Fatalf("exp a running command record, got %+v %v", ci, err)
	}
	if inf := s.Info(); inf.State != StateRunning || inf.Running != id {
		t.Fatalf("exp session running %s, got %+v", id, inf)
	}
	f, err := s.Follow(ctx, id, Stdout, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The first line arrives while the command still runs.
	buf := make([]byte, 100)
	n, err := f.Read(buf)
	if err != nil || string(buf[:n]) != "line1\n" {
		t.Fatalf("exp the first line live, got %q %v", buf[:n], err)
	}
	if ci, _ := s.Command(id); ci.State != CommandRunning {
		t.Fatalf("the first line came only after the command ended")
	}
	rest, err := io.ReadAll(f)
	if err != nil || string(rest) != "line2\nline3\n" {
		t.Fatalf("exp the rest then EOF, got %q %v", rest, err)
	}
	res, err := s.Wait(ctx, id)
	if err != nil || res.ExitCode != 4 {
		t.Fatalf("exp exit 4, got %+v %v", res, err)
	}
	// Reads by offset, byte-exact, on either stream.
	b, err := s.ReadOutput(id, Stderr, 3, 100)
	if err != nil || string(b) != "e2\ne3\n" {
		t.Fatalf("exp stderr from offset 3, got %q %v", b, err)
	}
	b, _ = s.ReadOutput(id, Stdout, 1000, 10)
	if len(b) != 0 {
		t.Fatalf("exp nothing past the end, got %q", b)
	}
	// Following a finished command from an offset gives the rest and EOF.
	f2, err := s.Follow(ctx, id, Stdout, 6)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := io.ReadAll(f2)
	f2.Close()
	if string(all) != "line2\nline3\n" {
		t.Fatalf("follow from offset: got %q", all)
	}
	if _, err := s.ReadOutput("nope", Stdout, 0, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("exp ErrNotFound, got %v", err)
	}
	if _, err := s.ReadOutput(id, "stdin", 0, 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("exp ErrInvalid for a bad stream, got %v", err)
	}
}

// 8. Follow wakes on writes, not on a polling tick: many small writes with
// gaps arrive one by one.
func TestFollowIsLive(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "live"})
	ctx := context.Background()
	id, err := s.Start(ctx, ExecRequest{Command: "for i in $(seq 20); do printf x; sleep 0.01; done"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Follow(ctx, id, Stdout, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reads := 0
	total := 0
	buf := make([]byte, 64)
	for {
		n, err := f.Read(buf)
		total += n
		if n > 0 {
			reads++
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if total != 20 {
		t.Fatalf("exp 20 bytes, got %d", total)
	}
	// With 10 ms between writes, a live follower sees most writes
	// separately; a 50 ms poll would see at most a handful of reads.
	if reads < 10 {
		t.Fatalf("exp the follower to wake per write, got %d reads for 20 writes", reads)
	}
}

// 9. History: every command with its record, on disk, surviving the Manager.
func TestHistory(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, func(c *Config) { c.Dir = dir })
	s := mustCreate(t, m, CreateRequest{ID: "hist"})
	run(t, s, "echo hello")
	run(t, s, "echo oops >&2; exit_now=1; false")
	h := s.History()
	if len(h) != 2 {
		t.Fatalf("exp 2 records, got %d", len(h))
	}
	if h[0].ID != "1" || h[0].Command != "echo hello" || *h[0].ExitCode != 0 || h[0].StdoutBytes != 6 || h[0].EndedAt == nil || h[0].EndedAt.Before(h[0].StartedAt) {
		t.Fatalf("bad record %+v", h[0])
	}
	if *h[1].ExitCode != 1 || h[1].StderrBytes != 5 {
		t.Fatalf("bad record %+v", h[1])
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2, err := Open(context.Background(), Config{Dir: dir, Launcher: LocalLauncher{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m2.CloseAll(context.Background()); m2.Close() })
	s2, err := m2.Get("hist")
	if err != nil {
		t.Fatal(err)
	}
	h2 := s2.History()
	if len(h2) != 2 || h2[1].Command != h[1].Command || *h2[1].ExitCode != 1 {
		t.Fatalf("history not reloaded: %+v", h2)
	}
	// Numbering continues.
	if res := run(t, s2, "true"); res.CommandID != "3" {
		t.Fatalf("exp command id 3, got %s", res.CommandID)
	}
}

// 10. One command at a time per session; sessions run in parallel.
func TestBusyAndParallel(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "busy"})
	ctx := context.Background()
	id, err := s.Start(ctx, ExecRequest{Command: "sleep 0.5"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = s.Exec(ctx, ExecRequest{Command: "echo second"})
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "command "+id) {
		t.Fatalf("exp ErrBusy naming command %s, got %v", id, err)
	}
	if time.Since(start) > 100*time.Millisecond {
		t.Fatalf("ErrBusy took %s: it waited", time.Since(start))
	}
	if err := s.SetEnv(ctx, map[string]string{"X": "1"}, nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("exp ErrBusy from SetEnv, got %v", err)
	}
	if _, err := s.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}

	const n = 8
	sessions := make([]*Session, n)
	for i := range sessions {
		sessions[i] = mustCreate(t, m, CreateRequest{ID: "par" + string(rune('a'+i))})
	}
	var wg sync.WaitGroup
	start = time.Now()
	for _, ps := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, err := ps.Exec(ctx, ExecRequest{Command: "sleep 1; echo $PATINA_SESSION_ID"}); err != nil || strings.TrimSpace(string(res.Stdout.Data)) != ps.ID() {
				t.Errorf("session %s: %v %q", ps.ID(), err, res.Stdout.Data)
			}
		}()
	}
	wg.Wait()
	// Serially this is 8 s; in parallel about 1 s.
	if wall := time.Since(start); wall > 4*time.Second {
		t.Fatalf("8 sessions × 1 s took %s: they did not run in parallel", wall)
	}
}

// 11. 1 GB of stdout streams to disk; the result holds head and tail only.
func TestLargeOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1 GB")
	}
	const limit = 64 << 10
	m := newManager(t, func(c *Config) { c.OutputLimit = limit })
	s := mustCreate(t, m, CreateRequest{ID: "large"})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := run(t, s, `head -c 1073741824 /dev/zero; printf END`)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	const size = 1<<30 + 3
	if res.Stdout.Size != size || !res.Stdout.Truncated || len(res.Stdout.Data) != limit || len(res.Stdout.Tail) != limit {
		t.Fatalf("exp size %d with %d-byte head and tail, got size %d head %d tail %d truncated %v",
			size, limit, res.Stdout.Size, len(res.Stdout.Data), len(res.Stdout.Tail), res.Stdout.Truncated)
	}
	if !bytes.HasSuffix(res.Stdout.Tail, []byte("\x00END")) || res.Stdout.Data[0] != 0 {
		t.Fatalf("bad head/tail")
	}
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 64<<20 {
		t.Fatalf("heap grew by %d MB for 1 GB of output", grew>>20)
	}
	b, err := s.ReadOutput(res.CommandID, Stdout, size-6, 100)
	if err != nil || string(b) != "\x00\x00\x00END" {
		t.Fatalf("read at offset: %q %v", b, err)
	}
	// Clean up the gigabyte now.
	os.Remove(filesFor(s.dir, res.CommandID).stdout)
}

// Only the last KeepOutputs commands keep their output files.
func TestOutputRetention(t *testing.T) {
	m := newManager(t, func(c *Config) { c.KeepOutputs = 2 })
	s := mustCreate(t, m, CreateRequest{ID: "keep"})
	for i := 0; i < 4; i++ {
		run(t, s, "echo hi")
	}
	// Pruning runs beside the next command, off the result's path.
	var err error
	waitFor(t, "command 1's output pruned", 5*time.Second, func() bool {
		_, err = s.ReadOutput("1", Stdout, 0, 10)
		return err != nil
	})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "last 2") {
		t.Fatalf("exp pruned output, got %v", err)
	}
	if ci, _ := s.Command("1"); !ci.OutputPruned {
		t.Fatalf("exp record to say output pruned")
	}
	if b, err := s.ReadOutput("4", Stdout, 0, 10); err != nil || string(b) != "hi\n" {
		t.Fatalf("newest output: %q %v", b, err)
	}
}

// Wait after a command finished returns the same result Exec gave.
func TestWaitAfterTheFact(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "late"})
	res := run(t, s, "cd /tmp; echo hi")
	got, err := s.Wait(context.Background(), res.CommandID)
	if err != nil || got.Cwd != "/tmp" || string(got.Stdout.Data) != "hi\n" || got.ExitCode != 0 {
		t.Fatalf("exp the full result, got %+v %v", got, err)
	}
	for i := 0; i < recentResults+2; i++ {
		run(t, s, "true")
	}
	// Older results are rebuilt from history and files.
	got, err = s.Wait(context.Background(), res.CommandID)
	if err != nil || string(got.Stdout.Data) != "hi\n" || got.ExitCode != 0 {
		t.Fatalf("exp the rebuilt result, got %+v %v", got, err)
	}
}
