// Package session runs persistent bash sessions: shells that behave like a
// terminal that never forgets (cd, export, functions, aliases, set -o and
// shopt persist between commands) and never hang.
//
// # API
//
// A [Manager] owns the sessions under one directory ([Open]); it reattaches to
// sessions already there, so a process that restarts (even after kill -9)
// finds its live sessions, their state intact, and the results of commands
// that ran while it was away. [Manager.Close] lets go without ending them;
// [Session.Close] ends one; [Manager.Remove] also deletes its files.
//
//	m, err := session.Open(ctx, session.Config{Dir: dir, Launcher: session.LocalLauncher{}})
//	s, err := m.Create(ctx, session.CreateRequest{ID: "main", Cwd: "/work"})
//	res, err := s.Exec(ctx, session.ExecRequest{Command: "cd src && make", Timeout: time.Minute})
//	// res.ExitCode, res.Stdout.Data, res.Stderr.Data, res.TimedOut, res.Ended ...
//
// [Session.Exec] runs a command and waits; [Session.Start] returns its id at
// once, and [Session.Wait], [Session.Command], [Session.ReadOutput] (by byte
// offset) and [Session.Follow] (a live io.Reader woken by inotify) take the
// id. [Session.Signal] stops a running command; [Session.SetEnv] exports
// variables; [Session.History] lists every command.
//
// Semantics:
//   - stdout and stderr are captured separately and byte-exact to files; an
//     [ExecResult] carries at most Config.OutputLimit bytes of head and of
//     tail of each ([Output]), the rest is read by offset.
//   - A command's stdin is EOF, or [ExecRequest.Stdin]; never the shell's
//     own input.
//   - Background jobs never delay an exec and keep running in the session.
//   - A command that ends the shell (exit, exec, set -e, a fatal signal)
//     returns with Ended; later calls fail with [ErrEnded] saying how.
//   - A timeout or Signal sends SIGINT to the command's process tree, then
//     SIGKILL after Config.InterruptGrace; the shell abandons the rest of the
//     command line and keeps its state, including what the command changed
//     before it was stopped. A shell that cannot be interrupted is replaced
//     and restored from a snapshot of its state ([ExecResult.ShellReplaced]).
//   - One command at a time per session: a concurrent Exec fails at once
//     with [ErrBusy]. Sessions run fully in parallel.
//
// Errors are the sentinels [ErrNotFound], [ErrExists], [ErrBusy],
// [ErrEnded] (as an [*EndedError]), [ErrClosed], [ErrNotRunning],
// [ErrInvalid] and [ErrLocked]; check them with errors.Is.
//
// The shell runs through a [Launcher]: [LocalLauncher] on this machine, or
// the sidecar's Docker launcher inside a container (which bind-mounts the
// session directory at the same path). A program that runs many local
// sessions calls [StartReaper] from its main (a process-wide SIGCHLD
// handler) so that their shells cost no thread each while they run. See
// DESIGN.md for how it works.
package session
