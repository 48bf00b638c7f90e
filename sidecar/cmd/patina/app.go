package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// app is what every command shares: where it reads and writes, the
// environment, the clock, and the global flags. Tests build one with
// buffers and a fake environment.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	now    func() time.Time
	// executable is the path of this program (bench starts it as a sidecar).
	executable func() (string, error)

	// The global flags as given ("" when not given).
	stateDir, addr, token string
	// queryTimeout bounds the calls that only read (ws ls, ws show,
	// sessions, history, ws log), which a working sidecar answers at once:
	// a sidecar that accepts connections but answers nothing fails them
	// soon. apiTimeout bounds the others, which may take long (ws create
	// may pull an image), except exec, which runs as long as its command.
	// Zero means no bound.
	queryTimeout, apiTimeout time.Duration

	// ranCommand is set once a command's RunE starts: an error before that
	// is a usage error (unknown command or flag, wrong arguments).
	ranCommand bool
	// conn is the connection a client command resolved, for error messages.
	conn *connection
}

func newApp() *app {
	return &app{
		stdin:        os.Stdin,
		stdout:       os.Stdout,
		stderr:       os.Stderr,
		getenv:       os.Getenv,
		now:          time.Now,
		executable:   os.Executable,
		queryTimeout: 30 * time.Second,
		apiTimeout:   5 * time.Minute,
	}
}

// Exit statuses of patina itself (exec exits with its command's status).
const (
	exitOK          = 0
	exitFailure     = 1   // patina failed: the message says why
	exitUsage       = 2   // bad command line
	exitTimedOut    = 124 // exec --timeout ran out, as timeout(1) exits
	exitInterrupted = 130 // Ctrl-C or SIGTERM
)

// exitError makes patina exit with code, having printed what it had to.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// usageError is a bad command line found by a command itself.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// run executes the command line args and returns the exit status.
func run(ctx context.Context, args []string, a *app) int {
	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ue *usageError
	if errors.As(err, &ue) || !a.ranCommand {
		fmt.Fprintf(a.stderr, "patina: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
		return exitUsage
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(a.stderr, "patina: interrupted")
		return exitInterrupted
	}
	fmt.Fprintln(a.stderr, "patina: "+a.explain(err))
	return exitFailure
}

// markRunning wraps the RunE of c and its subcommands so that a.ranCommand
// is set when one starts: an error returned before that came from parsing
// the command line.
func (a *app) markRunning(c *cobra.Command) {
	if inner := c.RunE; inner != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			a.ranCommand = true
			return inner(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		a.markRunning(sub)
	}
}
