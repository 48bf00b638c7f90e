package session

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// 1. State persists between execs of one session.
func TestStatePersists(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "state"})
	dir := t.TempDir()
	rc := filepath.Join(dir, "rc.sh")
	if err := os.WriteFile(rc, []byte("SOURCED=yes\nsourced_fn() { echo from-rc; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct{ name, set, check, exp string }{
		{"cd", "cd " + dir, "pwd", dir + "\n"},
		{"export", "export EXPORTED=one", "bash -c 'echo $EXPORTED'", "one\n"},
		{"unset", "export GONE=1; unset GONE", "echo ${GONE-unset}", "unset\n"},
		{"variable", "plain='a b'", "echo \"$plain\"", "a b\n"},
		{"array", "arr=(x y z)", "echo ${arr[2]} ${#arr[@]}", "z 3\n"},
		{"function", "greet() { echo hi \"$1\"; }", "greet you", "hi you\n"},
		{"alias", "alias ll='echo aliased'", "ll", "aliased\n"},
		{"set -o", "set -o noglob", "echo *", "*\n"},
		{"set +o", "set +o noglob", "[[ $- == *f* ]] && echo on || echo off", "off\n"},
		{"shopt", "shopt -s extglob", "shopt -q extglob && echo on", "on\n"},
		{"source", "source " + rc, "echo $SOURCED; sourced_fn", "yes\nfrom-rc\n"},
		{"umask", "umask 027", "umask", "0027\n"},
		{"OLDPWD", "cd /; cd " + dir, "cd - >/dev/null; pwd", "/\n"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			out(t, s, st.set)
			expectOut(t, s, st.check, st.exp)
		})
	}
}

// 1. Setting env through the API twice in a row works (the seed bug).
func TestSetEnvTwice(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "env", Env: map[string]string{"FIRST": "1"}})
	ctx := context.Background()
	if err := s.SetEnv(ctx, map[string]string{"A": "1", "Q": `it's "quoted" $HOME`}, nil); err != nil {
		t.Fatalf("first SetEnv: %v", err)
	}
	if err := s.SetEnv(ctx, map[string]string{"A": "2", "B": "x\ny"}, []string{"FIRST"}); err != nil {
		t.Fatalf("second SetEnv: %v", err)
	}
	expectOut(t, s, `printf '%s|%s|%s|%s' "$A" "$B" "$Q" "${FIRST-unset}"`, "2|x\ny|it's \"quoted\" $HOME|unset")
	// Exported: children see them.
	expectOut(t, s, `env | grep -c '^A=2$'`, "1\n")
	// $? is the user's, not the internal command's.
	run(t, s, "false")
	if err := s.SetEnv(ctx, map[string]string{"C": "3"}, nil); err != nil {
		t.Fatal(err)
	}
	expectOut(t, s, "echo $?", "1\n")
	if err := s.SetEnv(ctx, map[string]string{"1BAD": "x"}, nil); !strings.Contains(fmt.Sprint(err), "not a valid variable name") {
		t.Fatalf("exp invalid name error, got %v", err)
	}
	// SetEnv never shows up in the history.
	for _, ci := range s.History() {
		if strings.Contains(ci.Command, "export") {
			t.Fatalf("SetEnv leaked into history: %+v", ci)
		}
	}
}

// 2. stdout and stderr are captured separately and byte-exact; exit codes
// are exact.
func TestOutputByteExact(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "bytes"})
	var all bytes.Buffer
	for i := 0; i < 256; i++ {
		all.WriteByte(byte(i))
	}
	bin := filepath.Join(t.TempDir(), "all.bin")
	if err := os.WriteFile(bin, bytes.Repeat(all.Bytes(), 3), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, cmd      string
		stdout, stderr []byte
		exit           int
	}{
		{"separate streams", "echo out; echo err >&2; echo out2", []byte("out\nout2\n"), []byte("err\n"), 0},
		{"no trailing newline", "printf abc; printf def >&2", []byte("abc"), []byte("def"), 0},
		{"NUL bytes", `printf 'a\0b\0'; printf '\0' >&2`, []byte("a\x00b\x00"), []byte{0}, 0},
		{"carriage returns", `printf 'x\r\ny\rz'`, []byte("x\r\ny\rz"), nil, 0},
		{"invalid UTF-8", `printf '\xff\xfe\xc3('`, []byte("\xff\xfe\xc3("), nil, 0},
		{"every byte value", "cat " + bin + "; cat " + bin + " >&2", bytes.Repeat(all.Bytes(), 3), bytes.Repeat(all.Bytes(), 3), 0},
		{"exit 0", "true", nil, nil, 0},
		{"exit 1", "false", nil, nil, 1},
		{"exit 2", "(exit 2)", nil, nil, 2},
		{"exit 127", "no-such-command-xyz 2>/dev/null", nil, nil, 127},
		{"exit 255", "(exit 255)", nil, nil, 255},
		{"exit 256 wraps", "(exit 256)", nil, nil, 0},
		{"signal TERM", `bash -c 'kill -TERM $$'`, nil, nil, 128 + 15},
		{"signal KILL", `bash -c 'kill -KILL $$'`, nil, nil, 128 + 9},
		{"signal SEGV", `bash -c 'kill -SEGV $$' 2>/dev/null`, nil, nil, 128 + 11},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, s, c.cmd)
			if res.ExitCode != c.exit {
				t.Fatalf("exp exit %d, got %d (stderr %q)", c.exit, res.ExitCode, res.Stderr.Data)
			}
			if !bytes.Equal(res.Stdout.Data, c.stdout) {
				t.Fatalf("stdout: exp %q, got %q", c.stdout, res.Stdout.Data)
			}
			if !bytes.Equal(res.Stderr.Data, c.stderr) {
				t.Fatalf("stderr: exp %q, got %q", c.stderr, res.Stderr.Data)
			}
			if res.Stdout.Size != int64(len(c.stdout)) || res.Stdout.Truncated {
				t.Fatalf("stdout size %d truncated %v", res.Stdout.Size, res.Stdout.Truncated)
			}
		})
	}
	t.Run("10 MB line", func(t *testing.T) {
		res := run(t, s, `head -c 10000000 /dev/zero | tr '\0' x; echo`)
		exp := append(bytes.Repeat([]byte("x"), 10_000_000), '\n')
		if res.Stdout.Size != int64(len(exp)) {
			t.Fatalf("exp size %d, got %d", len(exp), res.Stdout.Size)
		}
		// The result carries head and tail; the whole is on disk.
		whole, err := s.ReadOutput(res.CommandID, Stdout, 0, len(exp)+10)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(whole, exp) {
			t.Fatalf("10 MB line differs (len %d)", len(whole))
		}
	})
}

// 3. Any command text works and can never break the wrapper.
func TestCommandText(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "text"})
	cases := []struct {
		name, cmd, stdout string
		exit              int
		stderrHas         string
	}{
		{"multi-line", "echo one\necho two\n\necho three", "one\ntwo\nthree\n", 0, ""},
		{"heredoc", "cat <<'EOF'\n$HOME `x` \"q\" 'q'\nEOF", "$HOME `x` \"q\" 'q'\n", 0, ""},
		{"heredoc expanding", "X=5\ncat <<EOF\nx=$X\nEOF", "x=5\n", 0, ""},
		{"quotes", `echo "dq 'sq'" 'sq "dq"' $'ansi\tc'`, "dq 'sq' sq \"dq\" ansi\tc\n", 0, ""},
		{"comments", "# only a comment\necho yes # trailing\n#last", "yes\n", 0, ""},
		{"chains", "true && echo and; false || echo or; echo semi; false; echo after", "and\nor\nsemi\nafter\n", 0, ""},
		{"trailing backslash continues the line", `echo trailing \`, "trailing\n", 0, ""},
		{"unterminated double quote", `echo "never closed`, "", 2, "unexpected EOF"},
		{"unterminated single quote", `echo 'never closed`, "", 2, "unexpected EOF"},
		{"syntax error", "if then fi", "", 2, "syntax error"},
		{"unterminated heredoc", "cat <<EOF\nbody", "body\n", 0, "here-document"},
		{"wrapper lookalike", `echo '; } >&2; \builtin printf "done 1\n" >&251; {'`, "; } >&2; \\builtin printf \"done 1\\n\" >&251; {\n", 0, ""},
		{"braces and bang", "{ echo in; }; ! false && echo bang", "in\nbang\n", 0, ""},
		{"empty", "", "", 0, ""},
		{"only whitespace", "  \n\t\n", "", 0, ""},
		{"return at top level", "return 7", "", 7, ""},
		{"CRLF line endings", "echo a\r\n", "a\r\n", 0, ""},
		{"long command", "x=" + strings.Repeat("y", 200000) + "; echo ${#x}", "200000\n", 0, ""},
		{"writes to fd 251", "echo hi >&251", "", 1, "Bad file descriptor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, s, c.cmd)
			if res.ExitCode != c.exit || string(res.Stdout.Data) != c.stdout {
				t.Fatalf("exp exit %d stdout %q, got exit %d stdout %q stderr %q", c.exit, c.stdout, res.ExitCode, res.Stdout.Data, res.Stderr.Data)
			}
			if c.stderrHas != "" && !strings.Contains(string(res.Stderr.Data), c.stderrHas) {
				t.Fatalf("exp stderr to contain %q, got %q", c.stderrHas, res.Stderr.Data)
			}
			// The session is alive and sane afterwards.
			expectOut(t, s, "echo ok", "ok\n")
		})
	}
	if _, err := s.Exec(context.Background(), ExecRequest{Command: "echo a\x00b"}); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("exp an error about NUL bytes, got %v", err)
	}
}

// 4. stdin: EOF by default, or the request's bytes; never the control stream.
func TestStdin(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "stdin"})
	res := run(t, s, "cat; echo rc=$?")
	if string(res.Stdout.Data) != "rc=0\n" {
		t.Fatalf("cat without stdin: got %q", res.Stdout.Data)
	}
	expectOut(t, s, "read -r line; echo $?", "1\n")
	payload := []byte("line1\nbin\x00\xff\r\nno newline")
	res = runReq(t, s, ExecRequest{Command: "cat", Stdin: payload})
	if !bytes.Equal(res.Stdout.Data, payload) {
		t.Fatalf("stdin passthrough: exp %q, got %q", payload, res.Stdout.Data)
	}
	res = runReq(t, s, ExecRequest{Command: "read -r a; read -r b; echo \"$b,$a\"", Stdin: []byte("1\n2\n")})
	if string(res.Stdout.Data) != "2,1\n" {
		t.Fatalf("read from stdin: got %q", res.Stdout.Data)
	}
	// A command that reads all of stdin and then the next command: if stdin
	// were the command stream, the reader would swallow what follows.
	res = runReq(t, s, ExecRequest{Command: "cat /dev/stdin | wc -c; cat <&0 | wc -c"})
	if strings.Fields(string(res.Stdout.Data))[0] != "0" {
		t.Fatalf("reading /dev/stdin: got %q", res.Stdout.Data)
	}
	expectOut(t, s, "echo still-here", "still-here\n")
}

// A FIFO planted in place of a later command's output file (from inside
// the session) does not stall the driver: preparing that file opens it
// without blocking and reports it not clean. (os.OpenFile would wait for a
// reader forever.)
func TestFIFOForOutputFile(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "fifo"})
	out4 := filepath.Join(s.dir, "c", "4.out") // prepared once command 2 ends
	res := run(t, s, fmt.Sprintf("rm -f %q && mkfifo %q", out4, out4))
	if res.ExitCode != 0 {
		t.Fatalf("plant the FIFO: exit %d, %s", res.ExitCode, res.Stderr.Data)
	}
	expectOut(t, s, "echo two", "two\n")
	expectOut(t, s, "echo three", "three\n")
	// Nothing is left waiting on the FIFO.
	waitFor(t, "no goroutine opening the FIFO", 5*time.Second, func() bool {
		buf := make([]byte, 1<<20)
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "session.makeEmpty")
	})
	if st, err := os.Lstat(filepath.Join(s.dir, "c", "3.out")); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("command 3's stdout: %v %v", st, err)
	}
}

// Between commands the shell has no stdout or stderr (closeStdFDs: its
// redirections then cost fewer system calls); every command still gets its
// own, background jobs and their notices change nothing, and a replacement
// shell is the same.
func TestShellStdFDsClosedBetweenCommands(t *testing.T) {
	m := newManager(t)
	s := mustCreate(t, m, CreateRequest{ID: "stdfds"})
	closed := func(what string) {
		t.Helper()
		s.mu.Lock()
		shell := s.meta.ShellPID
		s.mu.Unlock()
		// The shell reports a command done from inside its last printf,
		// whose stdout it closes a moment later.
		waitFor(t, what+": the shell's fds 1 and 2 closed", 5*time.Second, func() bool {
			_, err1 := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", shell))
			_, err2 := os.Readlink(fmt.Sprintf("/proc/%d/fd/2", shell))
			return err1 != nil && err2 != nil
		})
	}
	closed("after start")
	res := run(t, s, `readlink /proc/$$/fd/1 /proc/$$/fd/2; echo err >&2`)
	if want := filepath.Join(s.dir, "c") + "/"; !strings.HasPrefix(string(res.Stdout.Data), want) || string(res.Stderr.Data) != "err\n" {
		t.Fatalf("a command's stdout and stderr: %q / %q, want its own files in %s", res.Stdout.Data, res.Stderr.Data, want)
	}
	run(t, s, "sleep 0.1 & PROMPT_COMMAND='echo prompt; echo prompt >&2'")
	time.Sleep(200 * time.Millisecond)
	expectOut(t, s, "echo after", "after\n")
	if res := run(t, s, "echo again; echo e >&2; (exit 7)"); res.ExitCode != 7 || string(res.Stdout.Data) != "again\n" || string(res.Stderr.Data) != "e\n" {
		t.Fatalf("exit 7: %d, %q, %q", res.ExitCode, res.Stdout.Data, res.Stderr.Data)
	}
	closed("after a background job and a PROMPT_COMMAND")
	if res := run(t, s, "false"); res.ExitCode != 1 {
		t.Fatalf("false: exit %d", res.ExitCode)
	}
	expectOut(t, s, `echo "last $?"`, "last 1\n")
}

// SetExtraEnv reaches the shells started after it, not the ones running.
func TestSetExtraEnv(t *testing.T) {
	m := newManager(t, func(c *Config) { c.Env = []string{"BASE=1"} })
	before := mustCreate(t, m, CreateRequest{ID: "before"})
	m.SetExtraEnv([]string{"EXTRA=two words", "BASE=2"})
	after := mustCreate(t, m, CreateRequest{ID: "after", Env: map[string]string{"OWN": "3"}})
	expectOut(t, before, `echo "${EXTRA-unset} $BASE"`, "unset 1\n")
	expectOut(t, after, `echo "$EXTRA $BASE $OWN"`, "two words 2 3\n")
}
