package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// kill -9 of the sidecar mid-command: after a restart the command's result
// is retrievable and the session's state is intact.
func TestSidecarKill9MidCommand(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"a.txt": "a\n"})
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "crash", Repo: repo})
	checkKill9MidCommand(t, h, "crash")
	w, err := h.Client.GetWorkspace(context.Background(), "crash")
	if err != nil || w.Branch != "patina/crash" {
		t.Fatalf("workspace after restart: %+v %v", w, err)
	}
}

// checkKill9MidCommand kills the sidecar with SIGKILL while a command of
// workspace ws runs, starts it again, and checks that the command's result
// and output, the session's state and the workspace are all there.
func checkKill9MidCommand(t *testing.T, h *Harness, ws string) {
	t.Helper()
	h.Out(ws, "default", "cd /tmp; export SURVIVES=yes; sf() { echo sf; }")
	ctx := context.Background()
	id, err := h.Client.Start(ctx, ws, "default", client.ExecRequest{Command: "echo start; sleep 2; echo end; (exit 4)"})
	if err != nil {
		t.Fatal(err)
	}
	WaitFor(t, "the command to start", 10*time.Second, func() bool {
		b, _ := h.Client.ReadOutput(ctx, ws, "default", id, "stdout", 0)
		return string(b) == "start\n"
	})
	h.Kill9()
	h.Launch()

	cmd, err := h.Client.Wait(ctx, ws, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.State != "finished" || cmd.ExitCode == nil || *cmd.ExitCode != 4 {
		t.Fatalf("exp the command's result after the restart, got %+v", cmd)
	}
	b, err := h.Client.ReadOutput(ctx, ws, "default", id, "stdout", 0)
	if err != nil || string(b) != "start\nend\n" {
		t.Fatalf("output after restart: %q %v", b, err)
	}
	if got := h.Out(ws, "default", `echo "$PWD $SURVIVES $(sf)"`); got != "/tmp yes sf\n" {
		t.Fatalf("session state after restart: %q", got)
	}
	w, err := h.Client.GetWorkspace(ctx, ws)
	if err != nil || w.Status != client.StatusRunning {
		t.Fatalf("workspace after restart: %+v %v", w, err)
	}
}

// A container removed behind the sidecar's back: the workspace reports
// stopped, exec says so clearly, and start recreates it with the sessions'
// state restored.
func TestContainerRemovedBehindOurBack(t *testing.T) {
	h := Start(t)
	w := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "gone"})
	h.Out("gone", "default", "cd /usr; export KEEP=1; echo data > /workspace/file")
	time.Sleep(100 * time.Millisecond) // let the idle state snapshot happen
	RemoveContainer(t, w.ContainerID)
	ctx := context.Background()
	WaitFor(t, "the workspace to be reported stopped", 10*time.Second, func() bool {
		w, err := h.Client.GetWorkspace(ctx, "gone")
		return err == nil && w.Status == client.StatusStopped
	})
	w2, _ := h.Client.GetWorkspace(ctx, "gone")
	if !strings.Contains(w2.Error, "removed") {
		t.Fatalf("exp the reason in the workspace, got %q", w2.Error)
	}
	_, err := h.Client.Exec(ctx, "gone", "default", client.ExecRequest{Command: "true"})
	if !IsCode(err, client.CodeStopped) || !strings.Contains(err.Error(), "start") {
		t.Fatalf("exp 409 stopped naming start, got %v", err)
	}
	w3, err := h.Client.StartWorkspace(ctx, "gone")
	if err != nil || w3.Status != client.StatusRunning || w3.ContainerID == w.ContainerID {
		t.Fatalf("start: %+v %v", w3, err)
	}
	if got := h.Out("gone", "default", "echo $PWD $KEEP; cat /workspace/file"); got != "/usr 1\ndata\n" {
		t.Fatalf("after start: %q", got)
	}
}

// Stop and start keep the worktree, the notes and the sessions' state.
func TestStopStart(t *testing.T) {
	h := Start(t)
	repo := GitRepo(t, map[string]string{"f": "1\n"})
	w := h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "ss", Repo: repo, Network: &client.NetworkPolicy{Mode: client.NetworkNone}})
	h.Out("ss", "default", "export KEPT=yes; echo 2 > f")
	time.Sleep(100 * time.Millisecond)
	ctx := context.Background()
	st, err := h.Client.StopWorkspace(ctx, "ss")
	if err != nil || st.Status != client.StatusStopped || st.Error != "" {
		t.Fatalf("stop: %+v %v", st, err)
	}
	if _, err := h.Client.Exec(ctx, "ss", "default", client.ExecRequest{Command: "true"}); !IsCode(err, client.CodeStopped) {
		t.Fatalf("exp stopped, got %v", err)
	}
	// History stays readable while stopped.
	if hist, err := h.Client.History(ctx, "ss", "default"); err != nil || len(hist) != 1 {
		t.Fatalf("history while stopped: %v %v", hist, err)
	}
	if _, err := h.Client.StartWorkspace(ctx, "ss"); err != nil {
		t.Fatal(err)
	}
	if got := h.Out("ss", "default", "echo $KEPT; cat f; tail -n +2 /proc/net/route | wc -l"); got != "yes\n2\n0\n" {
		t.Fatalf("after start: %q", got)
	}
	d, err := h.Client.Diff(ctx, "ss")
	if err != nil || len(d.Files) != 1 || !strings.Contains(d.Text, "+2") {
		t.Fatalf("diff after start: %+v %v", d, err)
	}
	lg, err := h.Client.Log(ctx, "ss")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range lg {
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, ","); !strings.Contains(got, "created,command,stopped,started") {
		t.Fatalf("log: %s", got)
	}
	_ = w
}

// kill -9 -1 inside a workspace kills its agent (and every process but the
// shell that ran it): the sidecar starts a new agent, the command's result
// comes back, the session's state is intact, and the API says what
// happened.
func TestAgentKilledFromInside(t *testing.T) {
	h := Start(t)
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "killer"})
	h.CreateWorkspace(client.CreateWorkspaceRequest{Name: "bystander"})
	h.Out("killer", "default", "cd /tmp; export KEPT=yes")
	before, _ := h.Client.GetWorkspace(context.Background(), "killer")
	res := h.Exec("killer", "default", "kill -9 -1; sleep 0.3; echo survived")
	if res.ExitCode != 0 || res.Stdout != "survived\n" {
		t.Fatalf("the command that killed the agent: %+v", res)
	}
	if got := h.Out("killer", "default", "echo $PWD $KEPT"); got != "/tmp yes\n" {
		t.Fatalf("the session after the agent's restart: %q", got)
	}
	ctx := context.Background()
	WaitFor(t, "the restart reported", 10*time.Second, func() bool {
		w, err := h.Client.GetWorkspace(ctx, "killer")
		return err == nil && w.Agent != nil && w.Agent.Restarts >= 1 && w.Agent.LastRestartReason != "" && w.Agent.PID != before.Agent.PID
	})
	w, _ := h.Client.GetWorkspace(ctx, "killer")
	t.Logf("agent after kill -9 -1: %+v", *w.Agent)
	lg, err := h.Client.Log(ctx, "killer")
	found := false
	for _, e := range lg {
		found = found || e.Kind == "agent-restarted"
	}
	if err != nil || !found {
		t.Fatalf("exp an agent-restarted event in the log: %+v %v", lg, err)
	}
	if w.Status != client.StatusRunning {
		t.Fatalf("the workspace: %+v", w)
	}
	if got := h.Out("bystander", "default", "echo fine"); got != "fine\n" {
		t.Fatalf("the other workspace: %q", got)
	}
}
