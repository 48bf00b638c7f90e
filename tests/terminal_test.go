package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// tmuxPane runs a command in a detached tmux session of its own (its own
// server socket), as a person at a terminal would.
type tmuxPane struct {
	t      *testing.T
	socket string
}

func startTmux(t *testing.T, cols, rows int, env []string, argv ...string) *tmuxPane {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is needed to drive patina attach (apt-get install tmux; .ci/run does)")
	}
	p := &tmuxPane{t: t, socket: fmt.Sprintf("patina-test-%d", time.Now().UnixNano())}
	args := append([]string{"new-session", "-d", "-x", fmt.Sprint(cols), "-y", fmt.Sprint(rows), "--"}, argv...)
	cmd := exec.Command("tmux", append([]string{"-L", p.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", p.socket, "kill-server").Run() })
	return p
}

func (p *tmuxPane) tmux(args ...string) string {
	p.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", p.socket}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

func (p *tmuxPane) keys(keys ...string) { p.tmux(append([]string{"send-keys", "-t", "0"}, keys...)...) }

func (p *tmuxPane) screen() string { return p.tmux("capture-pane", "-p", "-t", "0") }

// expect waits until the pane shows want.
func (p *tmuxPane) expect(want string) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := p.screen()
		if strings.Contains(s, want) {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the terminal never showed %q; it shows:\n%s", want, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exitStatus waits for the pane's command (run by attachArgv) to exit and
// returns its status.
func (p *tmuxPane) exitStatus() string {
	p.t.Helper()
	p.expect("attach-exit=")
	_, after, _ := strings.Cut(p.screen(), "attach-exit=")
	return strings.TrimSpace(strings.SplitN(after, "\n", 2)[0])
}

// attachArgv runs patina attach in a shell that prints its exit status.
func attachArgv(h *Harness, ws string) []string {
	return []string{"sh", "-c", `"$0" attach "$1" --state-dir "$2" --token "$3"; echo "attach-exit=$?"; sleep 600`, h.Bin, ws, h.StateDir, h.Token}
}

// TestAttachUnderTmux: `patina attach` driven like a person: the terminal
// starts where the session is, runs vim (its edit lands in the
// workspace), Ctrl-C stops a foreground command and leaves the shell,
// a window resize reaches the terminal, exec to the session answers 409
// busy meanwhile (another session runs), and what was typed by hand (cd,
// export, a function) is there for the next exec after Ctrl-] leaves.
func TestAttachUnderTmux(t *testing.T) {
	h := Start(t)
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "tty"})
	h.Out("tty", "default", "mkdir -p /tmp/start /tmp/moved && cd /tmp/start && export FROM_AGENT=agent-value && agentfn() { echo agentfn-ran; }")

	pane := startTmux(t, 100, 30, []string{"TERM=xterm-256color"}, attachArgv(h, "tty")...)
	pane.expect("Ctrl-] leaves")
	pane.keys(`echo "[$PWD|$FROM_AGENT|$(agentfn)|$(tput cols)x$(tput lines)]"`, "Enter")
	pane.expect("[/tmp/start|agent-value|agentfn-ran|100x30]")

	// 409 busy while attached; other sessions are not affected.
	_, err := h.Client.Exec(context.Background(), "tty", "default", client.ExecRequest{Command: "true"})
	if !IsCode(err, client.CodeBusy) || !strings.Contains(err.Error(), "terminal") {
		t.Fatalf("exec while attached: exp 409 busy naming the terminal, got %v", err)
	}
	if s, err := h.Client.GetSession(context.Background(), "tty", "default"); err != nil || !s.Terminal {
		t.Fatalf("session while attached: exp terminal true, got %+v %v", s, err)
	}
	h.CreateSession("tty", client.CreateSessionRequest{ID: "other"})
	if got := h.Out("tty", "other", "echo other-runs"); got != "other-runs\n" {
		t.Fatalf("another session while attached: %q", got)
	}

	// vim: insert text, write, quit.
	pane.keys("vi /tmp/start/note.txt", "Enter")
	pane.expect("~")
	pane.keys("i", "written in vim", "Escape", ":wq", "Enter")
	pane.keys("cat note.txt | tr a-z A-Z", "Enter")
	pane.expect("WRITTEN IN VIM")

	// Ctrl-C stops the foreground command; the shell and its state stay.
	pane.keys("sleep 300", "Enter")
	time.Sleep(500 * time.Millisecond)
	pane.keys("C-c")
	pane.keys(`echo "after-ctrl-c-$((20+1))"`, "Enter")
	pane.expect("after-ctrl-c-21")

	// A window resize reaches the terminal.
	pane.tmux("resize-window", "-t", "0", "-x", "120", "-y", "40")
	time.Sleep(300 * time.Millisecond)
	pane.keys(`clear; echo "size-$(stty size | tr ' ' x)"`, "Enter")
	pane.expect("size-40x120")

	// Typed by hand, then leave with Ctrl-].
	pane.keys(`cd /tmp/moved && export BY_HAND=typed && handfn() { echo handfn-$1; } && echo "done-$((1+1))"`, "Enter")
	pane.expect("done-2")
	pane.keys("C-]")
	if st := pane.exitStatus(); st != "0" {
		t.Fatalf("patina attach after Ctrl-]: exit %s; screen:\n%s", st, pane.screen())
	}
	if got := h.Out("tty", "default", `echo "$PWD|$BY_HAND|$(handfn x)|$(agentfn)|$FROM_AGENT"; cat /tmp/start/note.txt`); got != "/tmp/moved|typed|handfn-x|agentfn-ran|agent-value\nwritten in vim\n" {
		t.Fatalf("the session after the terminal: %q", got)
	}

	// exit N in the terminal: patina exits N.
	pane2 := startTmux(t, 80, 24, []string{"TERM=xterm-256color"}, attachArgv(h, "tty")...)
	pane2.expect("Ctrl-] leaves")
	pane2.keys("exit 5", "Enter")
	if st := pane2.exitStatus(); st != "5" {
		t.Fatalf("patina attach after exit 5: exit %s", st)
	}
}

// wsScreen reads a terminal WebSocket in the background.
type wsScreen struct {
	mu   sync.Mutex
	out  bytes.Buffer
	exit *client.TerminalMessage
	err  error
	done chan struct{}
}

func readTerminal(term *client.Terminal) *wsScreen {
	s := &wsScreen{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			ev, err := term.Next(context.Background())
			s.mu.Lock()
			switch {
			case err != nil:
				if !errors.Is(err, io.EOF) {
					s.err = err
				}
				s.mu.Unlock()
				return
			case ev.Exit != nil:
				s.exit = ev.Exit
			default:
				s.out.Write(ev.Output)
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *wsScreen) bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.out.Bytes()...)
}

func (s *wsScreen) expect(t *testing.T, want string) {
	t.Helper()
	s.expectWithin(t, want, 20*time.Second)
}

// expectWithin is expect with a deadline of its own.
func (s *wsScreen) expectWithin(t *testing.T, want string, within time.Duration) {
	t.Helper()
	WaitFor(t, fmt.Sprintf("the terminal to show %q", want), within, func() bool {
		return bytes.Contains(s.bytes(), []byte(want))
	})
}

// TestTerminalWebSocket: the API's terminal. Binary output passes through
// byte for byte, a resize message resizes, a client that drops comes back
// with its offset and gets exactly what it missed, "end" hands the session
// back, an attached terminal keeps an idle workspace running and attach
// resumes one that was stopped; failure cases answer before the upgrade.
// Exec with "tty": true runs a one-off command on a terminal.
func TestTerminalWebSocket(t *testing.T) {
	h := Start(t)
	ctx := context.Background()
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "wst", IdleStop: "3s"})
	h.Out("wst", "default", "cd /tmp && export V=1")

	term, err := h.Client.Terminal(ctx, "wst", "default", client.TerminalOptions{Rows: 20, Cols: 70})
	if err != nil {
		t.Fatal(err)
	}
	if term.Hello.Offset == nil || *term.Hello.Offset != 0 || !term.Hello.Started || term.Hello.Session != "default" {
		t.Fatalf("hello: %+v", term.Hello)
	}
	scr := readTerminal(term)
	term.Write(ctx, []byte("stty size; printf 'B:\\000\\001\\377\\033[1mX\\n'\r"))
	scr.expect(t, "20 70")
	scr.expect(t, "B:\x00\x01\xff\x1b[1mX")
	if err := term.Resize(ctx, 33, 99); err != nil {
		t.Fatal(err)
	}
	term.Write(ctx, []byte("stty size\r"))
	scr.expect(t, "33 99")

	// An attached terminal is activity: 14 s attached outlasts idle_stop
	// (3 s) and a check (10 s).
	time.Sleep(14 * time.Second)
	if w, err := h.Client.GetWorkspace(ctx, "wst"); err != nil || w.Status != client.StatusRunning {
		t.Fatalf("stopped while a terminal was attached: %+v %v", w, err)
	}

	// Drop the connection; output goes on; reconnect from the offset.
	term.Write(ctx, []byte("(sleep 1; echo missed-$((3*3))) &\r"))
	time.Sleep(300 * time.Millisecond)
	seen := int64(len(scr.bytes()))
	term.Close()
	<-scr.done
	seen = int64(len(scr.bytes()))
	time.Sleep(1500 * time.Millisecond)
	again, err := h.Client.Terminal(ctx, "wst", "default", client.TerminalOptions{Rows: 33, Cols: 99, Offset: seen})
	if err != nil {
		t.Fatal(err)
	}
	if again.Hello.Started || again.Hello.Offset == nil || *again.Hello.Offset != seen {
		t.Fatalf("reconnect at %d: hello %+v", seen, again.Hello)
	}
	scr2 := readTerminal(again)
	scr2.expect(t, "missed-9")
	if bytes.Contains(scr2.bytes(), []byte("20 70")) {
		t.Fatal("the reconnect replayed output the client had received")
	}
	// A second client at offset 0 sees the whole kept output.
	viewer, err := h.Client.Terminal(ctx, "wst", "default", client.TerminalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scr3 := readTerminal(viewer)
	scr3.expect(t, "20 70")
	viewer.Close()

	again.Write(ctx, []byte("cd / && export V=2\r"))
	time.Sleep(300 * time.Millisecond)
	if err := again.End(ctx); err != nil {
		t.Fatal(err)
	}
	<-scr2.done
	if scr2.exit == nil || scr2.exit.ExitCode == nil || scr2.exit.Reason != "hung up" {
		t.Fatalf("end: exp an exit message saying hung up, got %+v (err %v)", scr2.exit, scr2.err)
	}
	if got := h.Out("wst", "default", `echo "$PWD $V"`); got != "/ 2\n" {
		t.Fatalf("after end: %q", got)
	}

	// Stopped for being idle: attach starts it again, with the session's state.
	waitIdleStopped(t, h, "wst")
	back, err := h.Client.Terminal(ctx, "wst", "default", client.TerminalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !back.Hello.Resumed {
		t.Fatalf("attach to an idle-stopped workspace: hello %+v", back.Hello)
	}
	scr4 := readTerminal(back)
	back.Write(ctx, []byte("echo \"resumed:$PWD:$V\"; exit\r"))
	scr4.expect(t, "resumed:/:2")
	<-scr4.done
	if scr4.exit == nil || *scr4.exit.ExitCode != 0 {
		t.Fatalf("exit: %+v", scr4.exit)
	}

	// One-off TTY exec.
	res := h.ExecReq("wst", "default", client.ExecRequest{Command: `[ -t 1 ] && echo tty; stty size`, TTY: true, Rows: 12, Cols: 34})
	if res.ExitCode != 0 || res.Stdout != "tty\r\n12 34\r\n" {
		t.Fatalf("tty exec: %+v", res)
	}
	if _, err := h.Client.Exec(ctx, "wst", "default", client.ExecRequest{Command: "true", Rows: 5}); !IsCode(err, client.CodeInvalid) {
		t.Fatalf("rows without tty: exp 400, got %v", err)
	}
	if _, err := h.Client.Exec(ctx, "wst", "default", client.ExecRequest{Command: "true", TTY: true, Rows: 5000}); !IsCode(err, client.CodeInvalid) {
		t.Fatalf("5000 rows: exp 400, got %v", err)
	}

	// Failures answer before the upgrade, as HTTP errors.
	h.CreateSession("wst", client.CreateSessionRequest{ID: "busy"})
	h.CreateSession("wst", client.CreateSessionRequest{ID: "ended"})
	if _, err := h.Client.Start(ctx, "wst", "busy", client.ExecRequest{Command: "sleep 30"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.Terminal(ctx, "wst", "busy", client.TerminalOptions{}); !IsCode(err, client.CodeBusy) {
		t.Fatalf("attach to a session running a command: exp 409 busy, got %v", err)
	}
	h.Exec("wst", "ended", "exit 3")
	if _, err := h.Client.Terminal(ctx, "wst", "ended", client.TerminalOptions{}); !IsCode(err, client.CodeEnded) {
		t.Fatalf("attach to an ended session: exp 409 ended, got %v", err)
	}
	if _, err := h.Client.Terminal(ctx, "wst", "nosuch", client.TerminalOptions{}); !IsCode(err, client.CodeNotFound) {
		t.Fatalf("attach to no session: exp 404, got %v", err)
	}
	if _, err := h.Client.Terminal(ctx, "nows", "default", client.TerminalOptions{}); !IsCode(err, client.CodeNotFound) {
		t.Fatalf("attach to no workspace: exp 404, got %v", err)
	}
	for _, q := range []string{"rows=0", "cols=abc", "offset=-1", "term=a%20b"} {
		if code, body := h.Raw("GET", "/v1/workspaces/wst/sessions/default/terminal?"+q, "", nil, nil); code != 400 {
			t.Fatalf("terminal?%s: exp 400, got %d %s", q, code, body)
		}
	}
	if code, _ := h.Raw("GET", "/v1/workspaces/wst/sessions/default/terminal?token=wrong", "-", nil, nil); code != 401 {
		t.Fatalf("terminal with a wrong ?token=: exp 401, got %d", code)
	}
}

// TestHostileTerminal: what runs in a terminal cannot keep it, or its
// session, from its owner, nor bloat the sidecar. A shell that ignores the
// hangup is killed after its grace and the session is free again; 200 MB
// printed to a client that does not read costs the sidecar a bounded
// amount; a background process that holds the terminal does not keep it
// open.
func TestHostileTerminal(t *testing.T) {
	h := Start(t)
	ctx := context.Background()
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "evil"})
	h.Out("evil", "default", "export KEEP=1")

	// Ignores SIGHUP, and leaves a process that holds the terminal.
	term, err := h.Client.Terminal(ctx, "evil", "default", client.TerminalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scr := readTerminal(term)
	term.Write(ctx, []byte("trap '' HUP TERM; (trap '' HUP; exec sleep 1000) & echo armed-$((2*2))\r"))
	scr.expect(t, "armed-4")
	start := time.Now()
	if err := term.End(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-scr.done:
	case <-time.After(30 * time.Second):
		t.Fatal("a terminal that ignores SIGHUP was never ended")
	}
	if scr.exit == nil {
		t.Fatalf("no exit message (err %v)", scr.err)
	}
	t.Logf("a shell ignoring SIGHUP ended %s after end", time.Since(start).Round(time.Millisecond))
	if got := h.Out("evil", "default", `echo "$KEEP"`); got != "1\n" {
		t.Fatalf("the session after a killed terminal: %q", got)
	}

	// A flood to a client that stops reading.
	before := h.RSS() >> 20
	flood, err := h.Client.Terminal(ctx, "evil", "default", client.TerminalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	flood.Write(ctx, []byte("head -c 200000000 /dev/zero | tr '\\0' x; echo; echo flood-done-$((5*5))\r"))
	time.Sleep(8 * time.Second) // nobody reads meanwhile
	during := h.RSS() >> 20
	// The API answers other calls meanwhile.
	h.CreateSession("evil", client.CreateSessionRequest{ID: "side"})
	if got := h.Out("evil", "side", "echo side"); got != "side\n" {
		t.Fatalf("another session during a terminal flood: %q", got)
	}
	flood.Close()
	t.Logf("sidecar RSS %d MB before, %d MB with 200 MB printed to a client that does not read", before, during)
	if during > before+100 {
		t.Fatalf("the sidecar grew from %d MB to %d MB under a terminal flood", before, during)
	}
	// A new client takes the kept output (the last 1 MiB at most) and the end.
	again, err := h.Client.Terminal(ctx, "evil", "default", client.TerminalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scr2 := readTerminal(again)
	// gVisor's terminals are slower: the rest of 200 MB takes longer there.
	within := 20 * time.Second
	if underRunsc() {
		within = 3 * time.Minute
	}
	scr2.expectWithin(t, "flood-done-25", within)
	if err := again.End(ctx); err != nil {
		t.Fatal(err)
	}
	<-scr2.done
}
