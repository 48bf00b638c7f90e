package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/agent/inside"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/budget"
	"github.com/patina-dev/patina/sidecar/mux"
)

// A command's output crosses as raw bytes after its result: head and tail
// of both streams arrive exact (binary included), and the bytes are held
// against the budget until Release.
func TestExecOutputWithinBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs bash sessions")
	}
	f := newFixture(t, func(c *inside.ServerConfig) { c.OutputLimit = 64 << 10 })
	c := f.client
	b := budget.New(300 << 10)
	c.cfg.Budget = b
	c.cfg.OutputLimit = 64 << 10
	ctx := context.Background()
	// 1 MiB of binary on stdout, 100 KB of text on stderr: both truncated
	// to a 64 KiB head and tail.
	cmd := `head -c 1048576 /dev/urandom > /tmp/patina-budget-$$; cat /tmp/patina-budget-$$; sha256sum /tmp/patina-budget-$$ >&2; head -c 100000 /tmp/patina-budget-$$ | od -An -tx1 | head -c 100000 >&2; rm /tmp/patina-budget-$$`
	res, err := c.Exec(ctx, wire.ExecRequest{Session: "s", Command: cmd, Ensure: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := int64(1<<20), res.Stdout.Size; exp != got || !res.Stdout.Truncated {
		t.Fatalf("stdout size: exp %d truncated, got %d %v", exp, got, res.Stdout.Truncated)
	}
	if len(res.Stdout.Data) != 64<<10 || len(res.Stdout.Tail) != 64<<10 || len(res.Stderr.Data) != 64<<10 || int64(len(res.Stderr.Data)+len(res.Stderr.Tail)) != res.Stderr.Size {
		t.Fatalf("exp 64 KiB heads and tails (stderr's tail the rest), got %d %d %d %d of %d", len(res.Stdout.Data), len(res.Stdout.Tail), len(res.Stderr.Data), len(res.Stderr.Tail), res.Stderr.Size)
	}
	// The bytes are exact: the head matches what od printed of it on stderr.
	var od bytes.Buffer
	for _, x := range res.Stdout.Data[:16] {
		fmt.Fprintf(&od, " %02x", x)
	}
	if !bytes.Contains(res.Stderr.Data, od.Bytes()) {
		t.Fatalf("stdout's first bytes %q are not in what od printed: %.200q", od.String(), res.Stderr.Data)
	}
	if exp, got := int64(3*64<<10+len(res.Stderr.Tail)), b.Used(); exp != got {
		t.Fatalf("held: exp %d, got %d", exp, got)
	}
	// Spent: the next answer with output waits, up to its deadline.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = c.Exec(short, wire.ExecRequest{Session: "s", Command: "head -c 100000 /dev/zero"}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exp the answer to wait for the budget until its deadline, got %v", err)
	}
	res.Release()
	res.Release() // twice does nothing
	if got := b.Used(); got != 0 {
		t.Fatalf("exp nothing held after Release, got %d", got)
	}
	res2, err := c.Exec(ctx, wire.ExecRequest{Session: "s", Command: "head -c 100000 /dev/zero | tr '\\0' x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res2.Release()
	if sha256.Sum256(res2.Stdout.Data) != sha256.Sum256(bytes.Repeat([]byte("x"), 64<<10)) {
		t.Fatalf("exp 64 KiB of x, got %d bytes", len(res2.Stdout.Data))
	}
}

// A lying agent declares the largest output (four parts of OutputLimit)
// for every exec and then sends nothing, holding each answer until
// CallTimeout: its answers hold only its workspace's share of the budget,
// and another workspace's exec gets its answer within a deadline far
// shorter than that.
func TestLyingAgentHoldsOnlyItsShare(t *testing.T) {
	const limit = 1 << 20
	b := budget.New(budget.DefaultSize)
	withBudget := func(c *ClientConfig) {
		c.Budget, c.OutputLimit, c.CallTimeout = b, limit, 30*time.Second
	}
	part := fmt.Sprintf(`{"data_len":%d,"tail_len":%d,"size":%d,"truncated":true}`, limit, limit, 4*limit)
	lie := []byte(`{"r":{"command_id":"1","exit_code":0,"stdout":` + part + `,"stderr":` + part + "}}\n")
	var lies atomic.Int32
	liar := fakeAgent(t, func(st *mux.Stream) {
		var c wire.Call
		if json.Unmarshal(st.Header(), &c) != nil || c.Method != wire.MethodExec {
			st.Reset("no")
			return
		}
		if _, err := st.Write(lie); err != nil {
			return
		}
		lies.Add(1)
		<-st.Done() // the output never comes
	}, withBudget)

	// The honest workspace's agent sends 3 MiB of output, exact.
	out := make([]byte, 3*limit)
	for i := range out {
		out[i] = byte(i * 7 / 3)
	}
	honest := fakeAgent(t, func(st *mux.Stream) {
		head := fmt.Sprintf(`{"r":{"command_id":"1","exit_code":0,"stdout":{"data_len":%d,"tail_len":%d,"size":%d,"truncated":true},"stderr":{"data_len":%d,"size":%d}}}`+"\n", limit, limit, 5*limit, limit, limit)
		if _, err := st.Write([]byte(head)); err != nil {
			return
		}
		_, _ = st.WriteFinal(out)
	}, withBudget)

	// 16 execs of the liar would hold 64 MiB, twice the budget.
	const execs = 16
	lctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range execs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := liar.Exec(lctx, wire.ExecRequest{Session: "s", Command: "true"}, nil)
			if err == nil {
				res.Release()
				t.Error("a lying answer was accepted")
			}
		}()
	}
	defer func() {
		stop()
		wg.Wait()
	}()
	share := shareOf(b.Size(), limit)
	deadline := time.Now().Add(10 * time.Second)
	for lies.Load() < execs || b.Used() < share {
		if time.Now().After(deadline) {
			t.Fatalf("the liar's answers did not take their share: %d of %d lies sent, %d of %d bytes held", lies.Load(), execs, b.Used(), share)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := b.Used(); got != share {
		t.Fatalf("exp the liar to hold its share (%d bytes of %d), got %d", share, b.Size(), got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := honest.Exec(ctx, wire.ExecRequest{Session: "s", Command: "true"}, nil)
	if err != nil {
		t.Fatalf("another workspace's exec waited behind the liar: %v", err)
	}
	got := slices.Concat(res.Stdout.Data, res.Stdout.Tail, res.Stderr.Data)
	res.Release()
	if !bytes.Equal(got, out) {
		t.Fatalf("exp the honest output exact (%d bytes), got %d bytes", len(out), len(got))
	}
	if got := b.Used(); got > share {
		t.Fatalf("exp only the liar's share (%d) held after the honest answer's Release, got %d", share, got)
	}

	// Once the liar's callers leave, its share is given back.
	stop()
	wg.Wait()
	if got := b.Used(); got != 0 {
		t.Fatalf("exp nothing held once every caller left, got %d", got)
	}
}
