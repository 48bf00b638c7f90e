package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/patina-dev/patina/internal/syncbuf"
	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/session/sessiontest"
	"github.com/patina-dev/patina/sidecar/agent/inside"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/mux"
)

// fixture is a real agent (real bash sessions under a temp dir) behind an
// abstract unix socket, and a client of it.
type fixture struct {
	procs  *sessiontest.Launcher
	mu     sync.Mutex
	srv    *inside.Server
	ln     net.Listener
	addr   string
	client *Client
	work   string
	cancel context.CancelFunc
	dials  atomic.Int32
	mods   func(*inside.ServerConfig)
	log    *slog.Logger // the agents' and the client's, shown if the test fails
}

func newFixture(t *testing.T, mods ...func(*inside.ServerConfig)) *fixture {
	t.Helper()
	dir := t.TempDir()
	work := filepath.Join(dir, "workspace")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	f := &fixture{work: work, log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the agents' and the client's log:\n%s", logs)
		}
	})
	if len(mods) > 0 {
		f.mods = mods[0]
	}
	f.start(t, dir)
	return f
}

func (f *fixture) start(t *testing.T, dir string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if f.procs == nil {
		// stop simulates a crash and leaves the shells running; at the end
		// of the test they go.
		f.procs = &sessiontest.Launcher{}
		t.Cleanup(f.procs.KillAll)
	}
	addr := fmt.Sprintf("@patina-agent-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	cfg := inside.ServerConfig{
		WorkspaceID: "ws1", Token: "tok", StateDir: filepath.Join(dir, "state"), Workdir: f.work,
		Version: "test", InterruptGrace: 200 * time.Millisecond, Launcher: f.procs,
		Logger: f.log.With("agent", addr),
	}
	if f.mods != nil {
		f.mods(&cfg)
	}
	srv, err := inside.NewServer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ctx, ln)
	f.mu.Lock()
	f.srv, f.ln, f.addr, f.cancel = srv, ln, addr, cancel
	first := f.client == nil
	if first {
		f.client = NewClient(ClientConfig{WorkspaceID: "ws1", Token: "tok", Logger: f.log, Dial: func(ctx context.Context) (net.Conn, error) {
			f.dials.Add(1)
			f.mu.Lock()
			addr := f.addr
			f.mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, "unix", addr)
		}})
	}
	f.mu.Unlock()
	if first {
		t.Cleanup(func() { f.client.Close() })
	}
	t.Cleanup(func() { f.stop() })
}

// stop kills the agent the way a crash would: its connections drop, its
// sessions keep running.
func (f *fixture) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancel()
	f.ln.Close()
	f.srv.Close()
}

func TestExecAndSessions(t *testing.T) {
	f := newFixture(t)
	c := f.client
	ctx := context.Background()
	if _, err := c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "true"}, nil); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("exp not found without ensure, got %v", err)
	}
	res, err := c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "cd /tmp; export A=1; echo hi; echo err >&2; (exit 3)", Ensure: true}, nil)
	if err != nil || res.ExitCode != 3 || string(res.Stdout.Data) != "hi\n" || string(res.Stderr.Data) != "err\n" || res.Cwd != "/tmp" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	res, err = c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "echo $A $PWD; cat", Stdin: true}, []byte("in\x00put"))
	if err != nil || string(res.Stdout.Data) != "1 /tmp\nin\x00put" {
		t.Fatalf("state and stdin: %q %v", res.Stdout.Data, err)
	}
	// A slow command: the agent says its id first, then the result.
	res, err = c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "sleep 0.2; echo slow"}, nil)
	if err != nil || string(res.Stdout.Data) != "slow\n" {
		t.Fatalf("slow: %+v %v", res, err)
	}
	if _, err := c.CreateSession(ctx, wire.CreateSessionRequest{ID: "b", Env: map[string]string{"B": "2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(ctx, wire.CreateSessionRequest{ID: "b"}); !errors.Is(err, session.ErrExists) {
		t.Fatalf("exp exists, got %v", err)
	}
	list, err := c.Sessions(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("sessions: %+v %v", list, err)
	}
	if _, err := c.SetEnv(ctx, "b", map[string]string{"C": "x y"}, nil); err != nil {
		t.Fatal(err)
	}
	res, _ = c.Exec(ctx, wire.ExecRequest{Session: "b", Command: `echo "$B $C ${A-unset}"`}, nil)
	if string(res.Stdout.Data) != "2 x y unset\n" {
		t.Fatalf("session b: %q", res.Stdout.Data)
	}
	// Busy, and async start + wait + history + command.
	id, err := c.Start(ctx, wire.ExecRequest{Session: "b", Command: "sleep 0.3; echo done"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, wire.ExecRequest{Session: "b", Command: "true"}, nil); !errors.Is(err, session.ErrBusy) {
		t.Fatalf("exp busy, got %v", err)
	}
	res, err = c.Wait(ctx, "b", id)
	if err != nil || string(res.Stdout.Data) != "done\n" {
		t.Fatalf("wait: %+v %v", res, err)
	}
	hist, err := c.History(ctx, "b", 0, 0)
	if err != nil || len(hist) != 2 || hist[1].ID != id {
		t.Fatalf("history: %+v %v", hist, err)
	}
	if page, err := c.History(ctx, "b", 1, 0); err != nil || len(page) != 1 {
		t.Fatalf("history after 1: %+v %v", page, err)
	}
	ci, err := c.Command(ctx, "b", id)
	if err != nil || ci.State != session.CommandFinished || ci.StdoutBytes != 5 {
		t.Fatalf("command: %+v %v", ci, err)
	}
	// Exit ends the session; the error says how.
	res, err = c.Exec(ctx, wire.ExecRequest{Session: "b", Command: "exit 4"}, nil)
	if err != nil || !res.Ended || res.ExitCode != 4 {
		t.Fatalf("exit: %+v %v", res, err)
	}
	_, err = c.Exec(ctx, wire.ExecRequest{Session: "b", Command: "true"}, nil)
	var ended *session.EndedError
	if !errors.As(err, &ended) || ended.ExitCode != 4 {
		t.Fatalf("exp ended with 4, got %v", err)
	}
	if _, err := c.Revive(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	res, _ = c.Exec(ctx, wire.ExecRequest{Session: "b", Command: "echo $B"}, nil)
	if string(res.Stdout.Data) != "2\n" {
		t.Fatalf("revived: %q", res.Stdout.Data)
	}
	if err := c.RemoveSession(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Session(ctx, "b"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("exp not found after remove, got %v", err)
	}
	if f.dials.Load() != 1 {
		t.Fatalf("exp one connection for everything, got %d dials", f.dials.Load())
	}
}

func TestOutputAndSignal(t *testing.T) {
	f := newFixture(t)
	c := f.client
	ctx := context.Background()
	if _, err := c.CreateSession(ctx, wire.CreateSessionRequest{ID: "o"}); err != nil {
		t.Fatal(err)
	}
	id, err := c.Start(ctx, wire.ExecRequest{Session: "o", Command: "for i in 1 2 3; do echo out$i; sleep 0.1; done"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Output(ctx, wire.OutputRequest{Session: "o", Command: id, Stream: "stdout", Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(out)
	out.Close()
	if err != nil || string(b) != "out1\nout2\nout3\n" {
		t.Fatalf("follow: %q %v", b, err)
	}
	out, err = c.Output(ctx, wire.OutputRequest{Session: "o", Command: id, Stream: "stdout", Offset: 5})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(out)
	out.Close()
	if string(b) != "out2\nout3\n" || out.Size != 15 {
		t.Fatalf("by offset: %q size %d", b, out.Size)
	}
	if _, err := c.Output(ctx, wire.OutputRequest{Session: "o", Command: id, Stream: "stdout", Offset: 1 << 62}); !errors.Is(err, session.ErrInvalid) {
		t.Fatalf("exp invalid past the end, got %v", err)
	}
	id, _ = c.Start(ctx, wire.ExecRequest{Session: "o", Command: "echo go; sleep 100"}, nil)
	time.Sleep(100 * time.Millisecond)
	if err := c.Signal(ctx, "o", id, "INT"); err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx, "o", id)
	if err != nil || !res.Interrupted || res.ExitCode != 130 {
		t.Fatalf("signal: %+v %v", res, err)
	}
	if err := c.Signal(ctx, "o", id, "BOGUS"); !errors.Is(err, session.ErrInvalid) {
		t.Fatalf("exp invalid signal, got %v", err)
	}
	// A caller that leaves stops its command.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	res, err = c.Exec(cctx, wire.ExecRequest{Session: "o", Command: "sleep 100"}, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !res.Interrupted {
		t.Fatalf("exp the command stopped with the caller, got %+v %v", res, err)
	}
}

// The agent dies mid-command; a new one reattaches to the live shell; the
// waiting Exec reconnects (through Recover) and gets the result. Twice: the
// new agent dies too while Exec waits on it.
func TestAgentRestartMidCommand(t *testing.T) {
	for _, restarts := range []int32{1, 2} {
		t.Run(fmt.Sprintf("restarts=%d", restarts), func(t *testing.T) { testAgentRestarts(t, restarts) })
	}
}

func testAgentRestarts(t *testing.T, restarts int32) {
	f := newFixture(t)
	c := f.client
	ctx := context.Background()
	if _, err := c.CreateSession(ctx, wire.CreateSessionRequest{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(f.work)
	var recovered atomic.Int32
	c.cfg.Recover = func(ctx context.Context, cause error) error {
		recovered.Add(1)
		f.start(t, dir)
		return nil
	}
	type result struct {
		res session.ExecResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.Exec(ctx, wire.ExecRequest{Session: "r", Command: "echo a; sleep 1; echo b; (exit 6)"}, nil)
		done <- result{res.ExecResult, err}
	}()
	time.Sleep(200 * time.Millisecond)
	f.stop()
	for n := int32(1); n < restarts; n++ {
		// Once Exec waits on the new agent, that one dies too.
		deadline := time.Now().Add(5 * time.Second)
		for recovered.Load() < n && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		f.stop()
	}
	r := <-done
	if r.err != nil || r.res.ExitCode != 6 || string(r.res.Stdout.Data) != "a\nb\n" {
		// What the new agent knows helps tell a restart race from a lost result.
		infos, lerr := c.Sessions(ctx)
		t.Fatalf("exp the command's result across the restart, got %+v %v (recoveries %d; the new agent's sessions: %+v %v)",
			r.res, r.err, recovered.Load(), infos, lerr)
	}
	if recovered.Load() != restarts {
		t.Fatalf("exp %d recoveries, got %d", restarts, recovered.Load())
	}
	h, _ := c.Connect(ctx) // the hello of the new agent
	if h.Sessions != 1 || h.Live != 1 {
		t.Fatalf("exp the new agent to find the live session, got %+v", h)
	}
}

// The agent dies mid-command and none comes back: Exec says so after one
// try at recovering it, not one per wait.
func TestAgentGoneMidCommand(t *testing.T) {
	f := newFixture(t)
	c := f.client
	ctx := context.Background()
	if _, err := c.CreateSession(ctx, wire.CreateSessionRequest{ID: "g"}); err != nil {
		t.Fatal(err)
	}
	var recovered atomic.Int32
	c.cfg.Recover = func(ctx context.Context, cause error) error {
		recovered.Add(1)
		return errors.New("no agent here")
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, wire.ExecRequest{Session: "g", Command: "sleep 5"}, nil)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	f.stop()
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no agent here") {
			t.Fatalf("exp the agent unavailable, got %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Exec still waits for an agent that is gone")
	}
	if n := recovered.Load(); n != 1 {
		t.Fatalf("exp one try at recovering, got %d", n)
	}
}

func TestFiles(t *testing.T) {
	f := newFixture(t)
	c := f.client
	ctx := context.Background()
	data := []byte("bin\x00\xffary")
	if wr, err := c.WriteFile(ctx, "d/sub/f.bin", bytes.NewReader(data), 1<<20); err != nil || !wr.Created || wr.Size != int64(len(data)) {
		t.Fatalf("write: %+v %v", wr, err)
	}
	file, _, err := c.ReadFile(ctx, "d/sub/f.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(file)
	file.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("read back %q", got)
	}
	_, ents, err := c.ReadFile(ctx, "d")
	if err != nil || len(ents) != 1 || ents[0].Name != "sub" || ents[0].Type != "dir" {
		t.Fatalf("dir: %+v %v", ents, err)
	}
	if _, err := c.WriteFile(ctx, "big", bytes.NewReader(make([]byte, 2000)), 1000); !errors.Is(err, wire.ErrTooLarge) {
		t.Fatalf("exp too large, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.work, "big")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused upload left a file")
	}
	// Links that leave, a FIFO where a file is expected, paths with "..".
	if err := os.Symlink("/etc", filepath.Join(f.work, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(f.work, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"escape/passwd", "../x", "/etc/passwd", "d/../../x"} {
		if _, _, err := c.ReadFile(ctx, p); !errors.Is(err, wire.ErrEscapes) {
			t.Fatalf("read %s: exp escapes, got %v", p, err)
		}
		if _, err := c.WriteFile(ctx, p, strings.NewReader("x"), 10); !errors.Is(err, wire.ErrEscapes) {
			t.Fatalf("write %s: exp escapes, got %v", p, err)
		}
	}
	start := time.Now()
	if _, _, err := c.ReadFile(ctx, "fifo"); !errors.Is(err, session.ErrInvalid) || time.Since(start) > 5*time.Second {
		t.Fatalf("a FIFO: exp invalid at once, got %v after %s", err, time.Since(start))
	}
	if err := c.DeleteFile(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ReadFile(ctx, "d/sub/f.bin"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("exp not found after delete, got %v", err)
	}
	if err := c.DeleteFile(ctx, ""); !errors.Is(err, session.ErrInvalid) {
		t.Fatalf("exp the root refused, got %v", err)
	}
}

func TestHelloRefusesWrongTokenOrWorkspace(t *testing.T) {
	f := newFixture(t)
	for _, cfg := range []ClientConfig{{WorkspaceID: "ws1", Token: "nope"}, {WorkspaceID: "other", Token: "tok"}} {
		cfg.Dial = func(ctx context.Context) (net.Conn, error) { return net.Dial("unix", f.addr) }
		c := NewClient(cfg)
		_, err := c.Connect(context.Background())
		c.Close()
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("exp unavailable for %+v, got %v", cfg, err)
		}
	}
}

// writeResult answers with v and ends the stream, as the agent does.
func writeResult(st *mux.Stream, v any) {
	b, err := wire.ResultLine(v)
	if err != nil {
		panic(err)
	}
	_, _ = st.WriteFinal(b)
}

// fakeAgent answers every call with what reply writes: a hostile agent.
func fakeAgent(t *testing.T, reply func(st *mux.Stream), mods ...func(*ClientConfig)) *Client {
	t.Helper()
	return fakeAgentPipes(t, reply, true, mods...)
}

// fakeAgentPipes is fakeAgent; without pipes, it serves the mux on the
// socket as agents did before pipes (and takes the preamble for a bad
// frame).
func fakeAgentPipes(t *testing.T, reply func(st *mux.Stream), pipes bool, mods ...func(*ClientConfig)) *Client {
	t.Helper()
	return fakeAgentSpeaking(t, reply, fakeWire{pipes: pipes, protocol: wire.ProtocolVersion}, mods...)
}

// fakeWire is how a fake agent speaks: over pipes or not, which protocol
// its hello names, and (an agent of OldProtocol) every mux window full.
type fakeWire struct {
	pipes       bool
	protocol    int
	fullWindows bool
}

// fakeAgentSpeaking is fakeAgent speaking as w says.
func fakeAgentSpeaking(t *testing.T, reply func(st *mux.Stream), w fakeWire, mods ...func(*ClientConfig)) *Client {
	t.Helper()
	pipes := w.pipes
	addr := fmt.Sprintf("@patina-fake-agent-%d", time.Now().UnixNano())
	ln, err := net.Listen("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				if pipes {
					var err error
					if nc, err = wire.AcceptPipes(nc, 5*time.Second); err != nil {
						return
					}
				}
				conn := mux.Server(nc, mux.Config{})
				defer conn.Close()
				if w.fullWindows {
					conn.UseFullWindows()
				}
				st, err := conn.Accept(context.Background())
				if err != nil {
					return
				}
				writeResult(st, wire.Hello{WorkspaceID: "ws1", Protocol: w.protocol})
				st.Close()
				for {
					st, err := conn.Accept(context.Background())
					if err != nil {
						return
					}
					go reply(st)
				}
			}()
		}
	}()
	cfg := ClientConfig{WorkspaceID: "ws1", Token: "tok", CallTimeout: 500 * time.Millisecond, KeepAlive: 100 * time.Millisecond,
		Dial: func(ctx context.Context) (net.Conn, error) { return net.Dial("unix", addr) }}
	for _, m := range mods {
		m(&cfg)
	}
	c := NewClient(cfg)
	t.Cleanup(c.Close)
	return c
}

func TestHostileAgent(t *testing.T) {
	ctx := context.Background()
	result := func(s string) func(st *mux.Stream) {
		return func(st *mux.Stream) { _, _ = st.WriteFinal([]byte(s)) }
	}
	cases := map[string]func(st *mux.Stream){
		"garbage":             result("\x00\xffnot json\n"),
		"no newline":          result(`{"r":{}}`),
		"empty head":          result("{}\n"),
		"forged command id":   result(`{"r":{"command_id":"../../etc","exit_code":0,"stdout":{"size":0},"stderr":{"size":0}}}` + "\n"),
		"exit code 9999":      result(`{"r":{"command_id":"1","exit_code":9999,"stdout":{"size":0},"stderr":{"size":0}}}` + "\n"),
		"more data than size": result(`{"r":{"command_id":"1","exit_code":0,"stdout":{"data_len":5,"size":1},"stderr":{"size":0}}}` + "\nhello"),
		"output over limit":   result(`{"r":{"command_id":"1","exit_code":0,"stdout":{"data_len":1073741824,"size":1073741824},"stderr":{"size":0}}}` + "\n"),
		"negative length":     result(`{"r":{"command_id":"1","exit_code":0,"stdout":{"data_len":-5,"size":1},"stderr":{"size":0}}}` + "\n"),
		"output cut short":    result(`{"r":{"command_id":"1","exit_code":0,"stdout":{"data_len":5,"size":5},"stderr":{"size":0}}}` + "\nhel"),
		"output never sent": func(st *mux.Stream) {
			_, _ = st.Write([]byte(`{"r":{"command_id":"1","exit_code":0,"stdout":{"data_len":5,"size":5},"stderr":{"size":0}}}` + "\n"))
			<-st.Done()
		},
		"relative cwd":    result(`{"r":{"command_id":"1","exit_code":0,"stdout":{"size":0},"stderr":{"size":0},"cwd":"x"}}` + "\n"),
		"bad progress id": result(`{"id":"x/y"}` + "\n"),
		"huge head": func(st *mux.Stream) {
			_, _ = st.Write([]byte(`{"r":{"notice":"`))
			for i := 0; i < 200; i++ { // 12.8 MB, more than the result limit
				if _, err := st.Write(bytes.Repeat([]byte("a"), 64<<10)); err != nil {
					return
				}
			}
		},
		"hangs":       func(st *mux.Stream) { <-st.Done() },
		"reset":       func(st *mux.Stream) { st.Reset("no") },
		"closes conn": func(st *mux.Stream) { st.WriteFinal(nil) },
	}
	for name, reply := range cases {
		t.Run(name, func(t *testing.T) {
			c := fakeAgent(t, reply)
			done := make(chan error, 1)
			go func() {
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				_, err := c.Exec(cctx, wire.ExecRequest{Session: "default", Command: "true", TimeoutMS: 1}, nil)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("a hostile answer was accepted")
				}
			case <-time.After(90 * time.Second):
				t.Fatal("the client hung on a hostile agent")
			}
			// Quick calls are bounded by CallTimeout.
			start := time.Now()
			if _, err := c.Session(ctx, "default"); err == nil {
				t.Fatal("a hostile answer was accepted")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("a quick call took %s", d)
			}
		})
	}
}

// An agent that floods output: reading it costs bounded memory and a
// finished stream is cut at its announced size.
func TestHostileOutputFlood(t *testing.T) {
	c := fakeAgent(t, func(st *mux.Stream) {
		_ = wire.WriteHead(st, outputHead{Size: 10})
		for i := 0; i < 100; i++ {
			if _, err := st.Write(make([]byte, 64<<10)); err != nil {
				return
			}
		}
		st.CloseWrite()
	})
	out, err := c.Output(context.Background(), wire.OutputRequest{Session: "s", Command: "1", Stream: "stdout"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(out)
	out.Close()
	if len(b) != 10 {
		t.Fatalf("exp the output cut at its size (10), got %d", len(b))
	}
}

// A session that ran more commands than its history keeps in memory still
// pages through all of them, in order, with their texts, across an agent
// restart; a command from the start is still found by id.
func TestLongHistoryPages(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.client.CreateSession(ctx, wire.CreateSessionRequest{ID: "s", Cwd: f.work}); err != nil {
		t.Fatal(err)
	}
	const n = 700
	long := strings.Repeat("x", 300)
	text := func(i int) string {
		if i%100 == 0 {
			return fmt.Sprintf(": %d %s", i, long)
		}
		return fmt.Sprintf(": %d", i)
	}
	for i := 1; i <= n; i++ {
		if _, err := f.client.Exec(ctx, wire.ExecRequest{Session: "s", Command: text(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string) {
		t.Helper()
		var after uint64
		got := 0
		for {
			page, err := f.client.History(ctx, "s", after, 64)
			if err != nil {
				t.Fatalf("%s: history after %d: %v", what, after, err)
			}
			if len(page) == 0 {
				break
			}
			for _, ci := range page {
				got++
				if ci.ID != strconv.Itoa(got) || ci.Command != text(got) || ci.State != session.CommandFinished || ci.ExitCode == nil || *ci.ExitCode != 0 {
					t.Fatalf("%s: command %d: %+v", what, got, ci)
				}
			}
			after, _ = strconv.ParseUint(page[len(page)-1].ID, 10, 64)
		}
		if got != n {
			t.Fatalf("%s: paged through %d commands, want %d", what, got, n)
		}
		if ci, err := f.client.Command(ctx, "s", "100"); err != nil || ci.Command != text(100) {
			t.Fatalf("%s: command 100: %+v %v", what, ci, err)
		}
	}
	check("live")
	f.stop()
	f.start(t, filepath.Dir(f.work))
	check("after a restart")
}

// Calls that run something wait for the agent's setup (the container's git
// identity, done while the agent already answers hellos), and go on once it
// is done; a session's shell boots meanwhile.
func TestCallsWaitForSetup(t *testing.T) {
	setup := make(chan struct{})
	f := newFixture(t, func(c *inside.ServerConfig) { c.Setup = setup })
	ctx := context.Background()
	if _, err := f.client.Connect(ctx); err != nil {
		t.Fatalf("hello before the setup is done: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := f.client.CreateSession(cctx, wire.CreateSessionRequest{ID: "s", Cwd: f.work}); err != nil {
		t.Fatalf("create a session before the setup is done: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.client.Exec(ctx, wire.ExecRequest{Session: "s", Command: "true"}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("an exec answered before the setup was done: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(setup)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the exec did not go on once the setup was done")
	}
}
