package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// Every exec semantic of the session package, once, through HTTP.
func TestExecSemanticsOverHTTP(t *testing.T) {
	h := Start(t)
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "sem"})
	ctx := context.Background()

	t.Run("state persists", func(t *testing.T) {
		h.Out("sem", "default", "cd /usr; export P=1; pf() { echo pf; }; alias pa='echo pa'; set -o noglob; shopt -s extglob")
		if got := h.Out("sem", "default", "echo $PWD $P $(pf) *; pa; shopt -q extglob && echo x"); got != "/usr 1 pf *\npa\nx\n" {
			t.Fatalf("state lost: %q", got)
		}
		h.Out("sem", "default", "cd /workspace; set +o noglob")
	})
	t.Run("byte-exact output", func(t *testing.T) {
		res := h.Exec("sem", "default", `printf 'a\0b\xff\r\n'; printf 'no newline' >&2; (exit 7)`)
		if res.ExitCode != 7 || !bytes.Equal(res.StdoutData(), []byte("a\x00b\xff\r\n")) || res.Stderr != "no newline" {
			t.Fatalf("got %+v", res)
		}
		if res.StdoutBase64 != base64.StdEncoding.EncodeToString([]byte("a\x00b\xff\r\n")) {
			t.Fatalf("exp stdout_base64 for invalid UTF-8, got %q", res.StdoutBase64)
		}
		if res.StderrBase64 != "" {
			t.Fatalf("valid UTF-8 must not come as base64")
		}
	})
	t.Run("signal exit code", func(t *testing.T) {
		if res := h.Exec("sem", "default", `bash -c 'kill -TERM $$'`); res.ExitCode != 143 {
			t.Fatalf("exp 143, got %d", res.ExitCode)
		}
	})
	t.Run("syntax error", func(t *testing.T) {
		res := h.Exec("sem", "default", `echo "unterminated`)
		if res.ExitCode != 2 || !strings.Contains(res.Stderr, "unexpected EOF") {
			t.Fatalf("got %+v", res)
		}
		h.Out("sem", "default", "true")
	})
	t.Run("stdin", func(t *testing.T) {
		if got := h.Out("sem", "default", "cat; echo done"); got != "done\n" {
			t.Fatalf("exp EOF on stdin, got %q", got)
		}
		in := "line1\nline2"
		res := h.ExecReq("sem", "default", client.ExecRequest{Command: "wc -l; cat", Stdin: &in})
		if res.Stdout != "1\n" {
			t.Fatalf("stdin: %q", res.Stdout)
		}
		res = h.ExecReq("sem", "default", client.ExecRequest{Command: "od -An -tx1", StdinBase64: base64.StdEncoding.EncodeToString([]byte{0, 0xff})})
		if strings.TrimSpace(res.Stdout) != "00 ff" {
			t.Fatalf("binary stdin: %q", res.Stdout)
		}
	})
	t.Run("background child", func(t *testing.T) {
		start := time.Now()
		h.Out("sem", "default", "(sleep 300; echo late) & echo started")
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the exec waited for its background child")
		}
		if got := h.Out("sem", "default", "jobs -r | wc -l"); strings.TrimSpace(got) == "0" {
			t.Fatalf("the background job is gone")
		}
	})
	t.Run("timeout keeps state", func(t *testing.T) {
		res := h.ExecReq("sem", "default", client.ExecRequest{Command: "cd /etc; export T=1; echo before; sleep 100", TimeoutMS: 300})
		if !res.TimedOut || res.SessionEnded || res.Stdout != "before\n" {
			t.Fatalf("got %+v", res)
		}
		start := time.Now()
		if got := h.Out("sem", "default", "echo $PWD $T"); got != "/etc 1\n" {
			t.Fatalf("state after timeout: %q", got)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("the exec after a timeout took %s", d)
		}
		h.Out("sem", "default", "cd /workspace")
	})
	t.Run("busy", func(t *testing.T) {
		id, err := h.Client.Start(ctx, "sem", "default", client.ExecRequest{Command: "sleep 1"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.Client.Exec(ctx, "sem", "default", client.ExecRequest{Command: "true"})
		if !IsCode(err, client.CodeBusy) {
			t.Fatalf("exp 409 busy, got %v", err)
		}
		if ae := err.(*client.APIError); ae.Status != 409 {
			t.Fatalf("exp status 409, got %d", ae.Status)
		}
		if _, err := h.Client.Wait(ctx, "sem", "default", id); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("async, status, output by offset, follow", func(t *testing.T) {
		id, err := h.Client.Start(ctx, "sem", "default", client.ExecRequest{Command: "for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.3; done"})
		if err != nil || id == "" {
			t.Fatalf("start: %q %v", id, err)
		}
		cmd, err := h.Client.GetCommand(ctx, "sem", "default", id)
		if err != nil || cmd.State != "running" {
			t.Fatalf("exp running, got %+v %v", cmd, err)
		}
		rc, err := h.Client.OpenOutput(ctx, "sem", "default", id, "stdout", 0, true)
		if err != nil {
			t.Fatal(err)
		}
		first := make([]byte, 5)
		if _, err := io.ReadFull(rc, first); err != nil || string(first) != "out1\n" {
			t.Fatalf("follow: %q %v", first, err)
		}
		if cmd, _ := h.Client.GetCommand(ctx, "sem", "default", id); cmd.State != "running" {
			t.Fatalf("output arrived only after the command ended")
		}
		rest, _ := io.ReadAll(rc)
		rc.Close()
		if string(rest) != "out2\nout3\n" {
			t.Fatalf("follow rest: %q", rest)
		}
		b, err := h.Client.ReadOutput(ctx, "sem", "default", id, "stderr", 5)
		if err != nil || string(b) != "err2\nerr3\n" {
			t.Fatalf("stderr from offset 5: %q %v", b, err)
		}
		cmd, _ = h.Client.GetCommand(ctx, "sem", "default", id)
		if cmd.State != "finished" || *cmd.ExitCode != 0 || cmd.StdoutBytes != 15 {
			t.Fatalf("record: %+v", cmd)
		}
	})
	t.Run("signal", func(t *testing.T) {
		id, err := h.Client.Start(ctx, "sem", "default", client.ExecRequest{Command: "echo go; sleep 300"})
		if err != nil {
			t.Fatal(err)
		}
		WaitFor(t, "output", 10*time.Second, func() bool {
			b, _ := h.Client.ReadOutput(ctx, "sem", "default", id, "stdout", 0)
			return string(b) == "go\n"
		})
		if err := h.Client.Signal(ctx, "sem", "default", id, "INT"); err != nil {
			t.Fatal(err)
		}
		cmd, err := h.Client.Wait(ctx, "sem", "default", id)
		if err != nil || !cmd.Interrupted || *cmd.ExitCode != 130 {
			t.Fatalf("exp interrupted with 130, got %+v %v", cmd, err)
		}
		if err := h.Client.Signal(ctx, "sem", "default", id, "INT"); !IsCode(err, client.CodeNotRunning) {
			t.Fatalf("exp not_running, got %v", err)
		}
		if err := h.Client.Signal(ctx, "sem", "default", id, "BOGUS"); !IsCode(err, client.CodeInvalid) {
			t.Fatalf("exp invalid, got %v", err)
		}
	})
	t.Run("history", func(t *testing.T) {
		hist, err := h.Client.History(ctx, "sem", "default")
		if err != nil || len(hist) < 10 {
			t.Fatalf("history: %d %v", len(hist), err)
		}
		if hist[0].Command == "" || hist[0].ExitCode == nil || hist[0].EndedAt == nil {
			t.Fatalf("bad record %+v", hist[0])
		}
	})
	t.Run("large output", func(t *testing.T) {
		res := h.Exec("sem", "default", "head -c 3000000 /dev/zero | tr '\\0' x; echo END")
		if !res.StdoutTruncated || res.StdoutBytes != 3000004 || len(res.Stdout) != 1<<20 || !strings.HasSuffix(res.StdoutTail, "xEND\n") {
			t.Fatalf("truncation: bytes %d truncated %v head %d tail %d", res.StdoutBytes, res.StdoutTruncated, len(res.Stdout), len(res.StdoutTail))
		}
		b, err := h.Client.ReadOutput(ctx, "sem", "default", res.CommandID, "stdout", 2999990)
		if err != nil || string(b) != "xxxxxxxxxxEND\n" {
			t.Fatalf("read at offset: %q %v", b, err)
		}
	})
	t.Run("streamed (SSE)", func(t *testing.T) {
		var mu sync.Mutex
		var out, errs bytes.Buffer
		var times []time.Time
		res, err := h.Client.ExecStream(ctx, "sem", "default", client.ExecRequest{Command: "echo one; sleep 0.3; echo two >&2; printf '\\xff'"}, func(stream string, data []byte) {
			mu.Lock()
			defer mu.Unlock()
			times = append(times, time.Now())
			if stream == "stdout" {
				out.Write(data)
			} else {
				errs.Write(data)
			}
		})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("stream: %+v %v", res, err)
		}
		if out.String() != "one\n\xff" || errs.String() != "two\n" {
			t.Fatalf("streamed output: %q / %q", out.String(), errs.String())
		}
		if len(times) < 2 || times[len(times)-1].Sub(times[0]) < 200*time.Millisecond {
			t.Fatalf("output did not arrive live: %v", times)
		}
	})
	t.Run("exit ends the session", func(t *testing.T) {
		h.CreateSession("sem", client.CreateSessionRequest{ID: "ender"})
		res := h.Exec("sem", "ender", "exit 3")
		if !res.SessionEnded || res.ExitCode != 3 {
			t.Fatalf("exp ended with 3, got %+v", res)
		}
		_, err := h.Client.Exec(ctx, "sem", "ender", client.ExecRequest{Command: "true"})
		if !IsCode(err, client.CodeEnded) || !strings.Contains(err.Error(), "status 3") {
			t.Fatalf("exp 409 ended saying status 3, got %v", err)
		}
		s, err := h.Client.GetSession(ctx, "sem", "ender")
		if err != nil || s.Status != "ended" || s.ExitCode == nil || *s.ExitCode != 3 {
			t.Fatalf("session view: %+v %v", s, err)
		}
	})
	t.Run("delete session kills its processes", func(t *testing.T) {
		h.CreateSession("sem", client.CreateSessionRequest{ID: "doomed"})
		pid := strings.TrimSpace(h.Out("sem", "doomed", "setsid sleep 301 >/dev/null 2>&1 & sleep 0.1; pgrep -f 'sleep 301'"))
		if err := h.Client.DeleteSession(ctx, "sem", "doomed"); err != nil {
			t.Fatal(err)
		}
		WaitFor(t, "the session's processes to go", 10*time.Second, func() bool {
			res := h.Exec("sem", "default", "kill -0 "+pid+" 2>/dev/null && echo alive || echo gone")
			return res.Stdout == "gone\n"
		})
		if _, err := h.Client.GetSession(ctx, "sem", "doomed"); !IsCode(err, client.CodeNotFound) {
			t.Fatalf("exp 404, got %v", err)
		}
	})
}
