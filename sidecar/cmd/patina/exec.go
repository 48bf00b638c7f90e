package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/spf13/cobra"
)

// defaultSession is the session exec uses unless told; the sidecar creates
// it on first use.
const defaultSession = client.DefaultSession

type execOptions struct {
	session string
	timeout time.Duration
	stdin   bool
	fresh   bool
	tty     bool
}

func newExecCmd(a *app) *cobra.Command {
	var o execOptions
	cmd := &cobra.Command{
		Use:   "exec WS [--session S] [--timeout D] [--stdin] [--fresh] [--tty] -- COMMAND...",
		Short: "Run a command in a workspace's session, streaming its output",
		Long: `Run a command in a persistent bash session of a workspace and stream its output
live to stdout and stderr. patina exits with the command's exit status.

What follows -- is run as bash text in the session:
  - one argument is command text, used as it is, so quote it whole and pipes,
    &&, redirections and variables work:  patina exec ws -- 'cd src && make'
  - several arguments are words, one each, as in docker exec: each word that
    needs it is quoted for bash, so  patina exec ws -- sh -c 'exit 7'  runs sh
    with the two arguments -c and "exit 7". Words made only of letters, digits
    and _@%+=:,./- are left as they are, so aliases, functions and builtins
    of the session keep working:  patina exec ws -- cd /tmp

The session remembers its directory, variables, functions and aliases between
commands. A session is created on first use (in /workspace); sessions run in
parallel, each one command at a time. A command that exits the shell (exit,
exec, set -e and a failure) ends the session's shell: the next command in that
session runs in a new shell (in /workspace, without the variables and
functions of the old one; the session's command history and ids go on), and
patina says so on stderr. A shell killed from outside the session (kill -9 -1
or pkill in another session, the out-of-memory killer) comes back with its
state instead, and patina says so too. --fresh starts a new session on
purpose (its history removed).

The command reads EOF on its stdin unless --stdin is given: then patina reads
its own stdin to the end first and passes it to the command.

With --tty the command runs on a terminal the size of this one (24x80 if
none), with this terminal's TERM (xterm-256color if unset): it sees isatty and
can use colours; its output has CR LF line ends, and a cd or export in it is
not kept in the session.

If the connection to the sidecar breaks during the command (the sidecar was
restarted), the command carries on in the workspace: patina says so, waits up
to 60s for the sidecar to answer again, then prints the rest of the output
and exits with the command's status (or says how to fetch them).

With --timeout the command is interrupted (SIGINT, then SIGKILL) after that
long and patina exits with 124, as timeout(1) does. Ctrl-C stops the command
the same way and patina exits with 130. If patina itself fails (the sidecar
is unreachable, the session is busy...), it prints "patina: ..." and exits 1.`,
		Example: `  patina exec demo -- make test
  patina exec demo -- 'cd src && go test ./... 2>&1 | tail -n 20'
  patina exec demo -- sh -c 'exit 7'; echo $?     # 7
  patina exec demo --session build --timeout 10m -- make all
  echo 'print(1+1)' | patina exec demo --stdin -- python3`,
		Args: execArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.exec(cmd.Context(), args[0], commandText(args[1:]), o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.session, "session", "s", defaultSession, "the session to run in (created if it does not exist)")
	f.DurationVar(&o.timeout, "timeout", 0, "interrupt the command after this long, e.g. 30s or 10m (default: no limit)")
	f.BoolVar(&o.fresh, "fresh", false, "remove the session first if it exists (its shell, state and history): run in a new shell")
	f.BoolVar(&o.stdin, "stdin", false, "pass patina's stdin to the command (read to EOF before the command starts)")
	f.BoolVarP(&o.tty, "tty", "t", false, "run the command on a terminal the size of this one (24x80 if none): it sees isatty and the window size; its output has CR LF line ends; cd or export in it are not kept")
	return cmd
}

// commandText makes the bash text exec runs from the arguments after "--".
// One argument is command text, used as it is ('cd src && make'). Several
// are words, one each: those that need it are quoted for bash, so that
// `sh -c 'exit 7'` reaches sh as -c and "exit 7".
func commandText(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	words := make([]string, len(args))
	for i, w := range args {
		words[i] = shellQuote(w)
	}
	return strings.Join(words, " ")
}

// shellQuote returns w as one bash word. A word made only of characters
// bash takes literally is left as it is, so that an alias, a function or
// `cd /tmp` still works; anything else is single-quoted. An assignment
// NAME=value keeps NAME= outside the quotes, so that bash still takes it
// for one (`FOO='a b' make`).
func shellQuote(w string) string {
	if w != "" && strings.IndexFunc(w, func(r rune) bool { return !shellSafe(r) }) < 0 {
		return w
	}
	prefix := ""
	if m := assignment.FindString(w); m != "" {
		prefix, w = m, w[len(m):]
	}
	return prefix + "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// shellSafe reports whether bash takes r literally anywhere in a word.
func shellSafe(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' ||
		strings.ContainsRune("_@%+=:,./-", r)
}

// assignment matches the NAME= of a word bash takes for a variable
// assignment.
var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// execArgs expects WS then the command, after "--" (or without it when the
// command has no flags that patina could take for its own).
func execArgs(cmd *cobra.Command, args []string) error {
	dash := cmd.ArgsLenAtDash()
	switch {
	case len(args) == 0 || dash == 0:
		return usagef("exec needs a workspace and a command: patina exec WS -- COMMAND")
	case dash > 1:
		return usagef("put the whole command after --: patina exec %s -- %s", args[0], strings.Join(args[1:], " "))
	case len(args) == 1:
		return usagef("exec needs a command after the workspace: patina exec %s -- COMMAND", args[0])
	case strings.TrimSpace(strings.Join(args[1:], " ")) == "":
		return usagef("the command is empty")
	}
	return nil
}

func (a *app) exec(ctx context.Context, ws, command string, o execOptions) error {
	if o.timeout < 0 {
		return usagef("--timeout must not be negative")
	}
	req := client.ExecRequest{Command: command, TTY: o.tty}
	if o.tty {
		req.Rows, req.Cols = 24, 80
		if rows, cols, ok := winSize(a.stdout); ok {
			req.Rows, req.Cols = rows, cols
		}
		// This terminal's type, as attach passes it.
		req.Term = a.getenv("TERM")
		if req.Term == "" || req.Term == "dumb" {
			req.Term = "xterm-256color"
		}
	}
	if o.timeout > 0 {
		req.TimeoutMS = max(o.timeout.Milliseconds(), 1)
	}
	if o.stdin {
		data, err := io.ReadAll(a.stdin)
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		setStdin(&req, data)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	if o.fresh {
		if err := a.removeSession(ctx, c, ws, o.session); err != nil {
			return err
		}
	}
	onOutput := func(stream string, data []byte) {
		if stream == "stderr" {
			a.stderr.Write(data)
		} else {
			a.stdout.Write(data)
		}
	}
	// A session other than "default" is created on first use here; one
	// whose shell an earlier command ended (exit, exec...) is started
	// again, as the MCP server's run does, rather than fail every command
	// in it until --fresh.
	var res client.ExecResult
	err = client.InSession(ctx, sessionAPI{a, c}, client.SessionCall{
		Workspace: ws, Session: o.session, Restart: true,
		OnRestart: func() {
			fmt.Fprintf(a.stderr, "patina: session %q's shell had ended, so this command runs in a new shell "+
				"(state reset: it starts in /workspace, without the old shell's variables and functions; its command history goes on)\n", o.session)
		},
	}, func() (err error) {
		res, err = c.ExecStream(ctx, ws, o.session, req, onOutput)
		return err
	})
	if lost := (*client.StreamLostError)(nil); errors.As(err, &lost) {
		res, err = a.followLost(ctx, ws, o.session, lost, onOutput)
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			fmt.Fprintln(a.stderr, "patina: interrupted; the sidecar stops the command")
			return &exitError{code: exitInterrupted}
		}
		return a.stopped(ctx, c, ws, err)
	}
	return &exitError{code: a.reportExec(ws, res, o)}
}

// sessionAPI bounds the session calls of client.InSession by the CLI's
// API timeout, with its message when the sidecar does not answer.
type sessionAPI struct {
	a *app
	c *client.Client
}

func (s sessionAPI) CreateSession(ctx context.Context, ws string, req client.CreateSessionRequest) (client.Session, error) {
	ctx, cancel := s.a.apiContext(ctx)
	defer cancel()
	out, err := s.c.CreateSession(ctx, ws, req)
	return out, noAnswer(ctx, s.a.apiTimeout, err)
}

func (s sessionAPI) DeleteSession(ctx context.Context, ws, sid string) error {
	ctx, cancel := s.a.apiContext(ctx)
	defer cancel()
	return noAnswer(ctx, s.a.apiTimeout, s.c.DeleteSession(ctx, ws, sid))
}

func (s sessionAPI) RestartSession(ctx context.Context, ws, sid string) (client.Session, error) {
	ctx, cancel := s.a.apiContext(ctx)
	defer cancel()
	out, err := s.c.RestartSession(ctx, ws, sid)
	return out, noAnswer(ctx, s.a.apiTimeout, err)
}

// removeSession removes session sid if it exists.
func (a *app) removeSession(ctx context.Context, c *client.Client, ws, sid string) error {
	ctx, cancel := a.apiContext(ctx)
	defer cancel()
	err := c.DeleteSession(ctx, ws, sid)
	if errors.Is(err, client.ErrNotFound) {
		// Either the session does not exist (fine) or the workspace does
		// not: then the exec that follows says so.
		return nil
	}
	return noAnswer(ctx, a.apiTimeout, err)
}

// setStdin puts data into the request, as text when it is UTF-8.
func setStdin(req *client.ExecRequest, data []byte) {
	if utf8.Valid(data) {
		s := string(data)
		req.Stdin = &s
		return
	}
	req.StdinBase64 = base64.StdEncoding.EncodeToString(data)
}

// reportExec says on stderr what happened to a command beyond its output,
// and returns the status patina exits with.
func (a *app) reportExec(ws string, res client.ExecResult, o execOptions) int {
	code := res.ExitCode
	if res.Resumed {
		fmt.Fprintf(a.stderr, "patina: workspace %q had been stopped for being idle; it was started again for this command\n", ws)
	}
	switch {
	case res.TimedOut:
		fmt.Fprintf(a.stderr, "patina: command timed out after %s\n", o.timeout)
		code = exitTimedOut
	case res.Interrupted:
		fmt.Fprintln(a.stderr, "patina: command was interrupted")
	}
	if res.Notice != "" {
		fmt.Fprintf(a.stderr, "patina: %s\n", res.Notice)
	} else if res.ShellReplaced {
		fmt.Fprintf(a.stderr, "patina: session %q's shell did not come back after the interrupt and was replaced; its state was restored\n", o.session)
	}
	if res.SessionEnded {
		fmt.Fprintf(a.stderr, "patina: the command ended session %q's shell (exit status %d); the next command in it starts a new shell\n", o.session, res.ExitCode)
	}
	if code < 0 || code > 255 {
		fmt.Fprintf(a.stderr, "patina: the command's exit status is unknown (%d)\n", res.ExitCode)
		code = exitFailure
	}
	return code
}
