package session

import (
	"fmt"
	"strings"
)

// statusFD is the descriptor on which the shell reports to the driver. It is
// high so that user scripts (which use 3..9, and {var}> allocates from 10
// upwards) never collide with it.
const statusFD = 251

// supervisorScript is the session's first process, run by the Launcher as
//
//	bash --noprofile --norc -c "$supervisorScript" patina-session DIR GENERATION
//
// It keeps the status FIFO open read-write for the session's whole life (so
// the shell's reports never block or fail while no driver is attached, and
// the FIFO reaches EOF only when every session process is gone), then runs the
// interactive shell in the foreground with the command FIFO as stdin (opened
// read-write, so the shell never sees EOF when a driver goes away).
//
// When the shell exits, the supervisor either starts a replacement (the driver
// asked for generation N+1 by writing N+1 to DIR/replace before killing a
// wedged shell) or records the exit status in DIR/shell.exit and reports
// "ended STATUS" before exiting. Everything here is builtins: no forks beyond
// the shell itself.
const supervisorScript = `dir=$1 gen=${2:-0}
exec 251<>"$dir/status" || exit 125
while :; do
	bash --noprofile --norc --noediting -i 0<>"$dir/in" 2>>"$dir/shell.log"
	rc=$?
	want=
	read -r want <"$dir/replace" 2>/dev/null
	if [[ $want == "$((gen + 1))" ]]; then
		gen=$want
		continue
	fi
	break
done
printf '%d\n' "$rc" >|"$dir/shell.exit"
printf 'ended %d\n' "$rc" >&251
`

// initScript is the first line the driver sends to a new shell (and to a
// replacement, after restoring state). Interactive mode gives terminal
// semantics (SIGINT aborts the current command line and returns to the
// prompt, state intact); the rest turns off what interactive mode adds that a
// driven shell must not have: prompts, history, history expansion, mail
// checks. It ends by reporting ready (readyFormat).
//
// The URG trap is how a command is stopped as a whole: the driver sends the
// shell SIGURG along with the command's signal. Bash runs a trap only
// between commands (after a foreground child is gone), so the shell then
// SIGINTs itself while not waiting, and an interactive bash abandons the rest
// of the command line and returns to its prompt with its state. This works
// whether the child died of the signal, handled it and exited, or was
// SIGKILLed later; and in a busy builtin loop it fires at the next command.
// URG's default action is to ignore it, so a user who removes the trap makes
// stopping weaker, never fatal.
const initScript = `PS1= PS2= PS0= PS4='+ '; \builtin unset PROMPT_COMMAND HISTFILE MAILCHECK; \builtin set +o history +H; \builtin shopt -s expand_aliases; \builtin trap '\builtin kill -s INT $$' URG; `

// readyFormat reports that the shell is up: "ready GEN SUPERVISOR_PID
// SHELL_PID FLAGS CWD". Argument: the generation.
const readyFormat = `\builtin printf 'ready %%s %%s %%s %%s %%s\n' %d "$PPID" "$$" "$-" "${PWD-}" >&251` + "\n"

// wrapperFormat runs one command. The command text travels inside the line
// as a quoted here-document whose delimiter is random and absent from the
// text, so no quoting, heredoc, comment or syntax error in it can reach the
// wrapper (a syntax error ends the source with status 2 and bash's message
// on the command's stderr); bash passes a small here-document through a
// pipe, so running a command creates no file.
//
//	! { source /dev/fd/3; } 3<<'DELIM'
//	                    runs the text in the shell itself (cd, export,
//	                    functions persist). The "!" keeps a non-zero status
//	                    of source from tripping errexit outside the user's
//	                    own code (bash ignores inherited errexit inside a "!"
//	                    pipeline; when the user had set -e, the text starts
//	                    with "set -e;" to re-arm it for their code).
//	<IN                 stdin: the request's bytes, or /dev/null: a command
//	                    can never read the command FIFO.
//	1<>OUT 2<>ERR       byte-exact capture to the command's files, made
//	                    empty ahead of time, opened without truncating:
//	                    truncating even an empty file is an inode update
//	                    in the filesystem's journal, a tenth of the shell's
//	                    time for a short command (noclobber does not apply
//	                    to <>). Files not known empty, and internal
//	                    commands' (reused), are truncated instead:
//	                    1>|OUT 2>|ERR (>| beats noclobber).
//	251>&-              the command and its children never hold the status
//	                    FIFO, so a background child cannot delay anything.
//	PIPESTATUS[0]       the status before "!" inverted it, appended durably
//	                    to EXITS as "ID N", then "done" is reported.
//
// Everything runs from the first line (the here-document's body follows
// that line), so SIGINT abandons the whole of it.
//
// Arguments: IN, OUT, ERR, DELIM, ID, EXITS, text, and the output
// redirection (outNoTrunc or outTrunc).
const wrapperFormat = "! { \\builtin source /dev/fd/3; } 3<<'%[4]s' <%[1]s 1%[8]s%[2]s 2%[8]s%[3]s 251>&-; " +
	`\builtin printf '%[5]s %%d\n' "${PIPESTATUS[0]}" >>%[6]s; ` +
	`\builtin printf 'done %[5]s %%s %%s\n' "$-" "${PWD-}" >&251` + "\n" +
	"%[7]s\n" +
	"%[4]s\n"

// statusPrefix sets $? to the user's last status before a command line
// (the wrapper's own commands leave it 0); a here-string is a pipe, so this
// forks nothing and creates no file.
const statusPrefix = `\builtin source /dev/fd/3 3<<<'return %d' && :; `

// syncFormat is sent after interrupting a command. It runs once the shell is
// back at its prompt (at once if SIGINT aborted the command line, or after
// the command if the command handled the signal) and reports
// "sync K STATUS FLAGS CWD", STATUS being $? at that point. It touches no
// file, so a stale sync line read by a replacement shell is harmless.
// The driver records STATUS as the command's exit status and restores $?
// before the next command. Argument: K.
const syncFormat = `\builtin printf 'sync %d %%s %%s %%s\n' "$?" "$-" "${PWD-}" >&251` + "\n"

// snapshotFormat dumps the shell's state with builtins only, into a file
// that restoring a replacement shell sources. Options come last: restoring
// errexit or nounset before the rest would abort the restore. It runs when the
// session is idle, off the latency path. Arguments: FILE, K.
const snapshotFormat = `{ ` + stateDump + ` } >|%s 2>/dev/null 251>&-; \builtin printf 'snap %s\n' >&251` + "\n"

// stateDump prints the shell's state as bash that restores it (for a
// format string: its % are doubled).
const stateDump = stateDumpNoOpts + ` \builtin set +o;`

// stateDumpNoOpts is stateDump without the set -o options.
const stateDumpNoOpts = `\builtin declare -p; \builtin declare -f; \builtin alias -p; \builtin trap -p; ` +
	`\builtin umask -p; \builtin printf '\\builtin cd -- %%q\n' "${PWD-}"; \builtin shopt -p;`

// killtreeScript signals a session's processes from inside the session's
// environment (so it sees the right pid namespace). It reads /proc only and
// forks nothing. The process tree is read before anything is signalled.
//
//	killtree stop CHILDSIG SHELLSIG SHELL [SINCE]
//	    SHELL gets SHELLSIG first (URG: see initScript), then the
//	    foreground command gets CHILDSIG: every child of SHELL that does not
//	    ignore SIGINT (bash starts background jobs with SIGINT ignored when job
//	    control is off), and all their descendants. If SHELL itself ignores
//	    SIGINT, every child counts. SHELLSIG "-" leaves SHELL alone. With
//	    SINCE (a start time in clock ticks, as in /proc/PID/stat), a child
//	    started at or after SINCE counts even if it ignores SIGINT: a
//	    foreground command that ignores SIGINT looks just like a background
//	    job, and is told apart by having started with the command being
//	    stopped (a job that command put in the background goes with it).
//	killtree all SIG ROOT MARK
//	    ROOT and all its descendants, and every process whose environment
//	    holds MARK (daemons that re-parented themselves away).
//	killtree pids SIG PID...
//	    the given processes, and whatever descends from them now.
//
// It prints the pids it signalled.
const killtreeScript = `mode=$1 a2=$2 a3=$3 a4=$4
args=("$@")
declare -A kids=() start=()
for d in /proc/[0-9]*; do
	p=${d#/proc/}
	[[ $p == $$ ]] && continue
	read -r st <"$d/stat" 2>/dev/null || continue
	st=${st##*) }
	set -- $st
	kids[$2]+=" $p"
	start[$p]=${20}
done
ignint() {
	local l
	while read -r l; do
		if [[ $l == SigIgn:* ]]; then
			l=${l#SigIgn:}
			(( 16#${l//[[:space:]]/} & 2 )) && return 0
			return 1
		fi
	done <"/proc/$1/status" 2>/dev/null
	return 1
}
declare -A hit=()
add() {
	local p=$1 c
	[[ -n ${hit[$p]} ]] && return
	hit[$p]=1
	for c in ${kids[$p]}; do add "$c"; done
}
case $mode in
stop)
	csig=$a2 ssig=$a3 shell=$a4 since=${args[4]}
	shellign=0
	ignint "$shell" && shellign=1
	for c in ${kids[$shell]}; do
		if ((shellign)) || ! ignint "$c" || [[ -n $since && ${start[$c]} -ge $since ]]; then add "$c"; fi
	done
	[[ $ssig != - ]] && kill -s "$ssig" "$shell" 2>/dev/null && echo "$shell"
	sig=$csig
	;;
all)
	sig=$a2 root=$a3 mark=$a4
	add "$root"
	if [[ -n $mark ]]; then
		for d in /proc/[0-9]*; do
			p=${d#/proc/}
			[[ $p == $$ || -n ${hit[$p]} ]] && continue
			while IFS= read -r -d '' e; do
				if [[ $e == "$mark" ]]; then add "$p"; break; fi
			done <"$d/environ" 2>/dev/null
		done
	fi
	;;
pids)
	sig=$a2
	for p in "${args[@]:2}"; do [[ -d /proc/$p ]] && add "$p"; done
	;;
*)
	echo "killtree: unknown mode $mode" >&2
	exit 2
	;;
esac
pids=${!hit[*]}
if [[ -n $pids ]]; then
	kill -s "$sig" $pids 2>/dev/null
	echo $pids
fi
exit 0
`

// shellQuote quotes s for bash as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// The output redirections of wrapperFormat: files known to be empty
// (prepareOutputs) are not truncated; others, and an internal command's,
// are.
const (
	outNoTrunc = "<>"
	outTrunc   = ">|"
)

// wrapperLine is the text that runs command id: its text in a here-document
// with a delimiter absent from it, its output to f (truncated if trunc),
// its status to exits.
func wrapperLine(f cmdFiles, stdin, exits, id, text string, trunc bool) (string, error) {
	delim, err := heredocDelim("PATINA_EOF_", text)
	if err != nil {
		return "", err
	}
	op := outNoTrunc
	if trunc {
		op = outTrunc
	}
	return fmt.Sprintf(wrapperFormat, shellQuote(stdin), shellQuote(f.stdout), shellQuote(f.stderr),
		delim, id, shellQuote(exits), text, op), nil
}

// heredocDelim returns a here-document delimiter, prefix and random hex,
// that does not occur in text.
func heredocDelim(prefix, text string) (string, error) {
	for {
		r, err := randomHex(8)
		if err != nil {
			return "", err
		}
		if d := prefix + r; !strings.Contains(text, d) {
			return d, nil
		}
	}
}

// syncLine is the line sent after interrupting a command.
func syncLine(k uint64) string {
	return fmt.Sprintf(syncFormat, k)
}

// snapshotLine dumps state into file.
func snapshotLine(file string, k uint64) string {
	return fmt.Sprintf(snapshotFormat, shellQuote(file), fmt.Sprint(k))
}

// closeStdFDs closes the shell's own stdout and stderr as it starts, before
// any state is restored (a restored function named exec cannot catch it).
// Bash saves and restores each descriptor a redirection replaces
// (five system calls to save it, three to put it back) unless it is closed,
// and then it only closes it again: with both closed between commands, the
// wrapper's redirections and its two printfs cost 46 system calls instead
// of 72, a quarter less of bash's time per command. Every command runs with
// its own stdout and stderr (wrapperFormat). Between commands the shell
// writes nothing anyone reads (job notices went to shell.log, read only
// when a start fails), but a user's PROMPT_COMMAND or trap now runs without
// them (README, "Sessions"). Closing them in each command line instead
// would cost more than it saves: bash saves a descriptor even for exec,
// then drops the copy.
const closeStdFDs = `exec 1>&- 2>&-; `

// initLine sets up a new shell: the fixed settings, its stdout and stderr
// closed, then the extra lines (cd, exports, or a state restore), then
// reports ready for generation gen.
func initLine(gen int, extra string) string {
	var b strings.Builder
	b.WriteString(initScript)
	b.WriteString(closeStdFDs)
	b.WriteString(extra)
	fmt.Fprintf(&b, readyFormat, gen)
	return b.String()
}
