package agent

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent/inside"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/mux"
)

// screen collects a terminal's output.
type screen struct {
	mu   sync.Mutex
	out  bytes.Buffer
	exit chan wire.TermExit
	err  error
}

func watch(term *Terminal) *screen {
	sc := &screen{exit: make(chan wire.TermExit, 1)}
	go func() {
		for {
			ev, err := term.Next()
			if err != nil {
				sc.mu.Lock()
				sc.err = err
				sc.mu.Unlock()
				return
			}
			if ev.Exit != nil {
				sc.exit <- *ev.Exit
				return
			}
			sc.mu.Lock()
			sc.out.Write(ev.Output)
			sc.mu.Unlock()
		}
	}()
	return sc
}

func (sc *screen) text() string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.out.String()
}

func (sc *screen) expect(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(sc.text(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("terminal never showed %q; it showed %q", want, sc.text())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (sc *screen) exited(t *testing.T) wire.TermExit {
	t.Helper()
	select {
	case x := <-sc.exit:
		return x
	case <-time.After(15 * time.Second):
		t.Fatalf("the terminal did not end; it showed %q", sc.text())
	}
	return wire.TermExit{}
}

// A terminal starts where its session is, resizes, keeps running across a
// detach (a re-attach by offset gets what it missed, and only that), makes
// the session busy for exec meanwhile, passes any byte through, and on End
// hands the session back with what was typed.
func TestTerminal(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.client.CreateSession(ctx, wire.CreateSessionRequest{ID: "s", Cwd: f.work}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Exec(ctx, wire.ExecRequest{Session: "s", Command: "export X=from-session; mkdir -p sub"}, nil); err != nil {
		t.Fatal(err)
	}
	term, err := f.client.AttachTerminal(ctx, wire.TermAttachRequest{Session: "s", Rows: 24, Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	if !term.Head.Started || term.Head.Offset != 0 {
		t.Fatalf("first attach: head %+v", term.Head)
	}
	sc := watch(term)
	term.Input([]byte("echo \"$X-$((2+3))\"; stty size\r"))
	sc.expect(t, "from-session-5")
	sc.expect(t, "24 80")
	term.Resize(50, 132)
	term.Input([]byte("stty size; printf 'bin:\\000\\377\\033[31mred\\033[0m\\n'\r"))
	sc.expect(t, "50 132")
	sc.expect(t, "bin:\x00\xff\x1b[31mred\x1b[0m")
	if _, err := f.client.Exec(ctx, wire.ExecRequest{Session: "s", Command: "true"}, nil); !errors.Is(err, session.ErrBusy) {
		t.Fatalf("exec while a terminal is attached: exp ErrBusy, got %v", err)
	}
	if inf, err := f.client.Session(ctx, "s"); err != nil || !inf.Terminal {
		t.Fatalf("session info while attached: %+v %v", inf, err)
	}

	// Detach, let output happen while nobody watches, re-attach by offset.
	seen := int64(len(sc.text()))
	term.Input([]byte("cd sub; (sleep 0.3; echo while-away-$((6*7))) &\r"))
	time.Sleep(100 * time.Millisecond)
	seen = int64(len(sc.text()))
	term.Close()
	time.Sleep(600 * time.Millisecond)
	term2, err := f.client.AttachTerminal(ctx, wire.TermAttachRequest{Session: "s", Rows: 30, Cols: 100, Offset: seen})
	if err != nil {
		t.Fatal(err)
	}
	if term2.Head.Started || term2.Head.Offset != seen {
		t.Fatalf("re-attach at %d: head %+v", seen, term2.Head)
	}
	sc2 := watch(term2)
	sc2.expect(t, "while-away-42")
	if strings.Contains(sc2.text(), "from-session-5") {
		t.Fatal("re-attach by offset replayed what the client had seen")
	}
	// A second viewer from the start sees everything kept.
	term3, err := f.client.AttachTerminal(ctx, wire.TermAttachRequest{Session: "s", Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	sc3 := watch(term3)
	sc3.expect(t, "from-session-5")
	term3.Close()

	// Wait for the shell to have run the line: a hang-up loses typed input
	// the shell has not read yet, as closing a terminal window does.
	term2.Input([]byte("export TYPED=by-hand; echo typed-$((3*3))\r"))
	sc2.expect(t, "typed-9")
	if err := term2.End(); err != nil {
		t.Fatal(err)
	}
	x := sc2.exited(t)
	if x.Reason != "hung up" || x.ExitCode != 129 { // 128 + SIGHUP, as docs/api.md shows
		t.Fatalf("ended terminal: %+v", x)
	}
	term2.Close()
	res, err := f.client.Exec(ctx, wire.ExecRequest{Session: "s", Command: `echo "$PWD $TYPED $X"`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout.Data); got != f.work+"/sub by-hand from-session\n" {
		t.Fatalf("after the terminal: %q", got)
	}

	// A terminal whose shell exits ends by itself, with its status.
	term4, err := f.client.AttachTerminal(ctx, wire.TermAttachRequest{Session: "s", Rows: 24, Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	defer term4.Close()
	if !term4.Head.Started {
		t.Fatal("a new terminal after the last ended was not started")
	}
	sc4 := watch(term4)
	term4.Input([]byte("exit 7\r"))
	if x := sc4.exited(t); x.ExitCode != 7 || x.Reason != "" {
		t.Fatalf("exit 7: %+v", x)
	}
}

// Nobody attached for TermLinger: the terminal is hung up and the session
// is free again. A running command or an ended session refuses a terminal.
func TestTerminalLingerAndRefusals(t *testing.T) {
	f := newFixture(t, func(c *inside.ServerConfig) { c.TermLinger = 300 * time.Millisecond })
	ctx := context.Background()
	if _, err := f.client.CreateSession(ctx, wire.CreateSessionRequest{ID: "s", Cwd: f.work}); err != nil {
		t.Fatal(err)
	}
	term, err := f.client.AttachTerminal(ctx, wire.TermAttachRequest{Session: "s", Rows: 24, Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	sc := watch(term)
	term.Input([]byte("export LEFT=$((40+2)); echo set-$LEFT\r"))
	sc.expect(t, "set-42")
	term.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := f.client.Exec(ctx, wire.ExecRequest{Session: "s", Command: `echo "$LEFT"`}, nil)
		if err == nil {
			if string(res.Stdout.Data) != "42\n" {
				t.Fatalf("after linger: %q", res.Stdout.Data)
			}
			break
		}
		if !errors.Is(err, session.ErrBusy) || time.Now().After(deadline) {
			t.Fatalf("the terminal was not hung up after its linger: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	id, err := f.client.Start(ctx, wire.ExecRequest{Session: "s", Command: "sleep 5"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.AttachTerminal(ctx, wire.TermAttachRequest{Session: "s", Rows: 24, Cols: 80}); !errors.Is(err, session.ErrBusy) {
		t.Fatalf("attach while %s runs: exp ErrBusy, got %v", id, err)
	}
	if err := f.client.Signal(ctx, "s", id, "KILL"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Wait(ctx, "s", id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Exec(ctx, wire.ExecRequest{Session: "s", Command: "exit 3"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.AttachTerminal(ctx, wire.TermAttachRequest{Session: "s", Rows: 24, Cols: 80}); !errors.Is(err, session.ErrEnded) {
		t.Fatalf("attach to an ended session: exp ErrEnded, got %v", err)
	}
	if _, err := f.client.AttachTerminal(ctx, wire.TermAttachRequest{Session: "nope", Rows: 24, Cols: 80}); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("attach to no session: exp ErrNotFound, got %v", err)
	}
	if _, err := f.client.AttachTerminal(ctx, wire.TermAttachRequest{Session: "s", Rows: 0, Cols: 80}); !errors.Is(err, session.ErrInvalid) {
		t.Fatalf("attach with 0 rows: exp ErrInvalid, got %v", err)
	}
}

// A hostile agent's terminal frames (oversized, unknown, a lying head)
// are an error, never a hang or an allocation of what they claim.
func TestHostileTerminal(t *testing.T) {
	cases := map[string]string{
		"huge frame":   `{"r":{"sid":"s","offset":0}}` + "\n" + "o\xff\xff\xff\xff",
		"unknown type": `{"r":{"sid":"s","offset":0}}` + "\n" + "z\x00\x00\x00\x01a",
		"bad exit":     `{"r":{"sid":"s","offset":0}}` + "\n" + "x\x00\x00\x00\x03{{{",
	}
	for name, answer := range cases {
		t.Run(name, func(t *testing.T) {
			c := fakeAgent(t, func(st *mux.Stream) { _, _ = st.Write([]byte(answer)); <-st.Done() })
			term, err := c.AttachTerminal(context.Background(), wire.TermAttachRequest{Session: "s", Rows: 24, Cols: 80})
			if err != nil {
				t.Fatal(err)
			}
			defer term.Close()
			if _, err := term.Next(); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("exp ErrUnavailable, got %v", err)
			}
		})
	}
	c := fakeAgent(t, func(st *mux.Stream) { _, _ = st.Write([]byte(`{"r":{"sid":"other","offset":-5}}` + "\n")) })
	if _, err := c.AttachTerminal(context.Background(), wire.TermAttachRequest{Session: "s", Rows: 24, Cols: 80}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a lying head: exp ErrUnavailable, got %v", err)
	}
}
