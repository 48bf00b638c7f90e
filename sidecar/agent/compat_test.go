package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/budget"
	"github.com/patina-dev/patina/sidecar/mux"
)

// oldExecReply answers every call as an agent of OldProtocol answers an
// exec: the output inline in the result line (here 300,000 bytes of
// stdout, 400 KB of base64: more than one full window, so the answer
// crosses only if both sides use OldProtocol's windows).
func oldExecReply(stdout []byte) func(st *mux.Stream) {
	return func(st *mux.Stream) {
		line, _ := json.Marshal(map[string]any{"r": map[string]any{
			"command_id": "7", "exit_code": 3, "cwd": "/workspace",
			"stdout": map[string]any{"data": stdout, "size": len(stdout)},
			"stderr": map[string]any{"data": []byte("warn\n"), "size": 5},
		}})
		_, _ = st.WriteFinal(append(line, '\n'))
	}
}

// A workspace whose container an earlier release made answers in
// OldProtocol: its exec results are read and held against the budget
// until Release: a short line's output once decoded, a long line (read
// further only once taken) its limit.
func TestOldAgentSpokenTo(t *testing.T) {
	for _, out := range [][]byte{[]byte("short\n"), bytes.Repeat([]byte("0123456789"), 30000)} {
		b := budget.New(4 << 20)
		c := fakeAgentSpeaking(t, oldExecReply(out), fakeWire{protocol: wire.OldProtocol, fullWindows: true}, func(cfg *ClientConfig) {
			cfg.OldAgent, cfg.Budget = true, b
		})
		res, err := c.Exec(context.Background(), wire.ExecRequest{Session: "default", Command: "true"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 3 || res.CommandID != "7" || !bytes.Equal(res.Stdout.Data, out) || string(res.Stderr.Data) != "warn\n" {
			t.Fatalf("exp the old agent's result, got exit %d id %q, %d bytes of stdout, stderr %q", res.ExitCode, res.CommandID, len(res.Stdout.Data), res.Stderr.Data)
		}
		exp := int64(len(out) + 5)
		if len(out) > smallLine/2 {
			exp = c.oldLineHold()
		}
		if got := b.Used(); exp != got {
			t.Fatalf("%d bytes of output: exp %d held, got %d", len(out), exp, got)
		}
		res.Release()
		if got := b.Used(); got != 0 {
			t.Fatalf("exp nothing held after Release, got %d", got)
		}
	}
	c := fakeAgentSpeaking(t, oldExecReply(nil), fakeWire{protocol: wire.OldProtocol, fullWindows: true}, func(cfg *ClientConfig) { cfg.OldAgent = true })
	// What its agent cannot do is refused, saying what to do instead.
	if _, err := c.Restart(context.Background(), "default"); !errors.Is(err, wire.ErrConflict) {
		t.Fatalf("restart on an old agent: exp a conflict, got %v", err)
	}
}

// An agent in a container this release made that says it speaks
// OldProtocol (a hostile one, choosing the less bounded reading) is
// refused, and so are inline results from an agent of this protocol.
func TestOldProtocolRefusedFromNewContainer(t *testing.T) {
	out := []byte("hello\n")
	c := fakeAgentSpeaking(t, oldExecReply(out), fakeWire{protocol: wire.OldProtocol, fullWindows: true})
	if _, err := c.Exec(context.Background(), wire.ExecRequest{Session: "default", Command: "true"}, nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("exp the old protocol refused, got %v", err)
	}
	c = fakeAgentSpeaking(t, oldExecReply(out), fakeWire{protocol: wire.ProtocolVersion})
	res, err := c.Exec(context.Background(), wire.ExecRequest{Session: "default", Command: "true"}, nil)
	if err == nil && len(res.Stdout.Data) != 0 {
		t.Fatalf("exp inline output ignored from a protocol %d agent, got %q", wire.ProtocolVersion, res.Stdout.Data)
	}
}

// A hostile agent in an old container sends long result lines on many
// execs at once and never ends them: the lines are read only as far as
// their share of the budget allows (one here), and every exec ends when
// its caller gives up.
func TestOldAgentLongLinesHoldOnlyItsShare(t *testing.T) {
	b := budget.New(16 << 20)
	reply := func(st *mux.Stream) {
		_, _ = st.Write([]byte(`{"r":{"notice":"`))
		for i := 0; i < 80; i++ { // 5.2 MB, never ended
			if _, err := st.Write(bytes.Repeat([]byte("a"), 64<<10)); err != nil {
				return
			}
		}
		<-st.Done()
	}
	c := fakeAgentSpeaking(t, reply, fakeWire{protocol: wire.OldProtocol, fullWindows: true}, func(cfg *ClientConfig) {
		cfg.OldAgent, cfg.Budget = true, b
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			_, err := c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "true"}, nil)
			errs <- err
		}()
	}
	// Until a line is long enough to be held (slow under -race), then a
	// while longer: never more than the share.
	share := c.share().Size()
	held := time.Time{}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		used := b.Used()
		if used > share {
			t.Fatalf("the long lines hold %d bytes, more than this workspace's share (%d)", used, share)
		}
		if used > 0 && held.IsZero() {
			held = time.Now()
		}
		if !held.IsZero() && time.Since(held) > 500*time.Millisecond {
			break
		}
	}
	if held.IsZero() {
		t.Fatal("no long line was ever held against the budget")
	}
	cancel()
	for range 16 {
		if err := <-errs; err == nil {
			t.Fatal("an exec of a line never ended succeeded")
		}
	}
	if used := b.Used(); used != 0 {
		t.Fatalf("exp nothing held once the execs ended, got %d", used)
	}
}
