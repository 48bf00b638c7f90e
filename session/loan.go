package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// A session can be lent to a terminal: a person's interactive shell that
// starts where the session is and hands its state back when it ends.
// Lend dumps the session's state (cwd, variables, functions, aliases,
// traps, umask, options) to a file; the caller starts `bash --rcfile
// Loan.RCFile -i` on a terminal with Loan.Env; the rc file restores that
// state and, when the terminal's shell exits (exit, Ctrl-D, SIGHUP), dumps
// its own state for Return to source into the session's shell. While lent
// the session refuses commands with ErrBusy; its own shell never stops.
// What the terminal's shell changed is carried back; what it removed (an
// unset variable or function) is not, and its EXIT trap stays its own.

// Loan is a session lent to a terminal.
type Loan struct {
	s *Session
	// RCFile is the rc file for the terminal's bash.
	RCFile string
	// Shell is the bash binary to run.
	Shell string
	// Env is the session's own environment entries for the terminal's
	// processes (its id, and the marker Close finds its processes by).
	Env []string
	// Dir is the session's cwd when it was lent.
	Dir string

	returned bool
}

// Files of a loan, in the session's directory.
const (
	loanState  = "term.state"
	loanRC     = "term.rc"
	loanReturn = "term.return"
)

// termRC is the terminal shell's rc file. The user's usual rc files first
// (prompt, colours, completion), then the session's state over them, then
// what an interactive shell needs that the session's driven shell turns off
// (prompt, history, line editing). On exit it dumps its state for the
// session, less line editing (the session's shell reads a FIFO) and with
// the session's own TERM (the terminal's is not its). A hangup is trapped,
// not left to bash's own handling: bash may see the hung-up terminal's EOF
// first and run the EXIT trap, and then the hangup it had noted kills it
// in the middle of the dump, which is lost. So HUP runs the dump too, the
// dump ignores HUP while it writes, and a shell that lost its terminal
// exits 129 (128 + SIGHUP) either way, as a hung-up shell does. The
// session gets SIGHUP's default back (a HUP trap of its own set before the
// loan does not survive a terminal).
// Arguments: the state file, the return file.
const termRC = `[[ -r /etc/bash.bashrc ]] && \builtin source /etc/bash.bashrc
[[ -r ~/.bashrc ]] && \builtin source ~/.bashrc
__patina_ps1=${PS1-} __patina_term=${TERM-}
\builtin source %[1]s 2>/dev/null
if [[ -v TERM ]]; then __patina_session_term=$TERM; else \builtin unset -v __patina_session_term; fi
TERM=$__patina_term; \builtin export TERM
[[ -n ${PS1-} ]] || PS1=${__patina_ps1:-'\u@\h:\w\$ '}
\builtin set -o history -o emacs
\builtin trap - URG
__patina_term_exit() {
	\builtin trap - EXIT
	\builtin trap '' HUP
	\builtin local __patina_l __patina_hup=
	[[ -t 0 ]] || __patina_hup=1
	{ ` + stateDumpNoOpts + `
	  while IFS= \builtin read -r __patina_l; do
		case $__patina_l in *' emacs' | *' vi') ;; *) \builtin printf '%%s\n' "$__patina_l" ;; esac
	  done <<<"$(\builtin set +o)"
	  if [[ -v __patina_session_term ]]; then \builtin printf 'TERM=%%q\n' "$__patina_session_term"; else \builtin echo '\builtin unset -v TERM'; fi
	  \builtin echo '\builtin trap - HUP'
	} >|%[2]s 2>/dev/null
	[[ -z $__patina_hup ]] || \builtin exit 129
}
\builtin trap __patina_term_exit EXIT
\builtin trap '__patina_term_exit; \builtin exit 129' HUP
`

// returnScript sources what the terminal's shell left, then puts back what
// a driven shell needs (initScript) and drops the terminal's own names.
const returnScript = `\builtin source %s 2>/dev/null; ` + initScript +
	`\builtin unset -v COLUMNS LINES __patina_l __patina_hup __patina_ps1 __patina_term __patina_session_term; \builtin unset -f __patina_term_exit; `

// Lend hands the session to a terminal: it must be idle (ErrBusy if a
// command runs or it is lent already). Commands are refused with ErrBusy
// until Return.
func (s *Session) Lend(ctx context.Context) (*Loan, error) {
	s.mu.Lock()
	switch {
	case s.state == StateClosed || s.closing || s.detached:
		s.mu.Unlock()
		return nil, fmt.Errorf("session %s: %w", s.id, ErrClosed)
	case s.endErr != nil:
		err := s.endErr
		s.mu.Unlock()
		return nil, err
	case s.lent:
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: a terminal is attached to session %s already: leave that one first, or use another session", ErrBusy, s.id)
	case s.cur != nil:
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: session %s is running command %s: wait for it or signal it, then attach", ErrBusy, s.id, s.cur.id)
	}
	s.lent = true
	cwd := s.cwd
	env := append(s.m.baseEnv(), "PATINA_SESSION_ID="+s.id, s.meta.Marker)
	s.mu.Unlock()

	state, rc, ret := filepath.Join(s.dir, loanState), filepath.Join(s.dir, loanRC), filepath.Join(s.dir, loanReturn)
	_ = os.Remove(ret)
	err := os.WriteFile(rc, []byte(fmt.Sprintf(termRC, shellQuote(state), shellQuote(ret))), 0o600)
	if err == nil {
		_, err = s.runInternal(ctx, fmt.Sprintf(`{ `+stateDump+` } >|%s 2>/dev/null`, shellQuote(state)), kindLoan)
	}
	if err != nil {
		s.mu.Lock()
		s.lent = false
		s.mu.Unlock()
		return nil, fmt.Errorf("lend session %s: %w", s.id, err)
	}
	return &Loan{s: s, RCFile: rc, Shell: s.m.cfg.Shell, Env: env, Dir: cwd}, nil
}

// Return gives the session back: the state the terminal's shell left (if
// it left any: a shell killed by SIGKILL leaves none) is sourced into the
// session's shell, and commands are accepted again. Return is idempotent.
func (l *Loan) Return(ctx context.Context) error {
	s := l.s
	if l.returned {
		return nil
	}
	l.returned = true
	ret := filepath.Join(s.dir, loanReturn)
	var err error
	if st, serr := os.Stat(ret); serr == nil && st.Mode().IsRegular() {
		_, err = s.runInternal(ctx, fmt.Sprintf(returnScript, shellQuote(ret)), kindLoan)
	}
	for _, f := range []string{loanState, loanRC, loanReturn} {
		_ = os.Remove(filepath.Join(s.dir, f))
	}
	s.mu.Lock()
	s.lent = false
	s.dirty = true
	s.scheduleSnapshot()
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("return session %s: %w", s.id, err)
	}
	return nil
}
