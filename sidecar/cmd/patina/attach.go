package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/spf13/cobra"
)

// leaveKey ends an attached terminal from the keyboard: Ctrl-].
const leaveKey = 0x1d

func newAttachCmd(a *app) *cobra.Command {
	var sid string
	cmd := &cobra.Command{
		Use:   "attach WS [--session S]",
		Short: "Open an interactive terminal in a workspace's session",
		Long: `Open a real terminal (vim, less, htop, git add -p, a REPL, Ctrl-C, colours,
window resizes) in a session of a workspace.

The terminal starts where the session is: its directory, exported and plain
variables, functions, aliases and shell options. When you leave it (exit,
Ctrl-D, or Ctrl-] which hangs it up), what you changed by hand (a cd, an
export, a function or alias you defined) is carried back into the session, so
the agent's next exec continues from there. The terminal runs its own
interactive bash, so "the same session" means the state is carried over both
ways: processes started in the terminal are not the session's (a background
job is hung up when the terminal ends), what you unset is not unset in the
session, and the terminal's EXIT trap is its own.

While the terminal is open, exec in that session answers 409 busy (other
sessions run as usual); a session running a command cannot be attached to
(busy) and an ended one neither (ended). If the connection drops, patina
reconnects and gets the output it missed; a terminal nobody is attached to is
hung up after 60 s. A workspace stopped for being idle is started first.

Its standard input must be a terminal (otherwise patina refuses and exits 1:
use patina exec). patina exits with the terminal shell's exit status (0 after
Ctrl-], which says how to attach again).`,
		Example: `  patina attach demo
  patina attach demo --session build`,
		Args: wsArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.attach(cmd.Context(), args[0], sid)
		},
	}
	cmd.Flags().StringVarP(&sid, "session", "s", defaultSession, "the session to attach to (\"default\" is created if it does not exist)")
	return cmd
}

func (a *app) attach(ctx context.Context, ws, sid string) error {
	in, _ := a.stdin.(*os.File)
	if in == nil || !isTerminal(in) {
		return &messageError{msg: "attach needs a terminal on its standard input, and it is not one: " +
			"run it in a terminal; to run a command without one, use patina exec " + ws + " -- COMMAND"}
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	out, _ := a.stdout.(*os.File)
	o := client.TerminalOptions{Term: os.Getenv("TERM")}
	if rows, cols, ok := winSize(a.stdout); ok {
		o.Rows, o.Cols = rows, cols
	}
	if o.Term == "" || o.Term == "dumb" {
		o.Term = "xterm-256color"
	}
	t, err := c.Terminal(ctx, ws, sid, o)
	if err != nil {
		return err
	}
	interactive := false
	if in != nil {
		if restore, err := makeRaw(int(in.Fd())); err == nil {
			interactive = true
			defer restore()
			fmt.Fprintf(a.stderr, "attached to session %s of %s; Ctrl-] leaves\r\n", sid, ws)
		}
	}

	// The current connection, replaced on a reconnect.
	var conn atomic.Pointer[client.Terminal]
	conn.Store(t)
	cur := conn.Load
	left := make(chan struct{}, 1)
	go a.attachInput(ctx, cur, interactive, left)
	if out != nil {
		stop := watchResize(out, func(rows, cols int) { _ = cur().Resize(ctx, rows, cols) })
		defer stop()
	}

	off := *t.Hello.Offset
	for {
		ev, err := t.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Close()
				return ctx.Err()
			}
			// The connection dropped: resume from what we have.
			nt, rerr := a.reattach(ctx, c, ws, sid, o, off)
			if rerr != nil {
				return fmt.Errorf("the terminal's connection dropped (%v), and reconnecting failed: %w", err, rerr)
			}
			conn.Store(nt)
			t = nt
			continue
		}
		if ev.Exit != nil {
			t.Close()
			select {
			case <-left:
				fmt.Fprintf(a.stderr, "\r\nleft the terminal (Ctrl-]); what you changed is carried into session %s. Attach again: %s\r\n",
					sid, attachLine(ws, sid))
				return nil
			default:
			}
			switch {
			case ev.Exit.ExitCode == nil || *ev.Exit.ExitCode < 0:
				return errors.New("the terminal ended without an exit status")
			case *ev.Exit.ExitCode != 0:
				return &exitError{code: *ev.Exit.ExitCode}
			}
			return nil
		}
		off += int64(len(ev.Output))
		if _, err := a.stdout.Write(ev.Output); err != nil {
			_ = t.End(ctx)
			return err
		}
	}
}

// attachInput sends what is typed; Ctrl-] (on a terminal) or the end of
// the input (otherwise) ends the terminal.
func (a *app) attachInput(ctx context.Context, cur func() *client.Terminal, interactive bool, left chan<- struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := a.stdin.Read(buf)
		p := buf[:n]
		if interactive {
			for i, b := range p {
				if b == leaveKey {
					_ = cur().Write(ctx, p[:i])
					left <- struct{}{}
					_ = cur().End(ctx)
					return
				}
			}
		}
		if len(p) > 0 && cur().Write(ctx, p) != nil && ctx.Err() != nil {
			return
		}
		if err != nil {
			if errors.Is(err, io.EOF) && !interactive {
				// Let the shell read what was sent, then end it.
				time.Sleep(attachEOFSettle)
				_ = cur().Write(ctx, []byte{4})
			}
			return
		}
	}
}

// reattach reconnects to a terminal that is still running, from offset.
func (a *app) reattach(ctx context.Context, c *client.Client, ws, sid string, o client.TerminalOptions, off int64) (*client.Terminal, error) {
	o.Offset = off
	var err error
	for i := 0; i < 5; i++ {
		var t *client.Terminal
		if t, err = c.Terminal(ctx, ws, sid, o); err == nil {
			if t.Hello.Started {
				// The old one had ended meanwhile: this is a new terminal.
				_ = t.End(ctx)
				t.Close()
				return nil, errors.New("the terminal had ended")
			}
			return t, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(i+1) * reattachBackoff):
		}
	}
	return nil, err
}

// attachLine is the command that attaches to session sid of ws.
func attachLine(ws, sid string) string {
	if sid == defaultSession {
		return "patina attach " + ws
	}
	return "patina attach " + ws + " --session " + sid
}
