package tests

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/bench"
	pclient "github.com/patina-dev/patina/sidecar/client"
)

// TestRunsc runs, on one Docker engine with gVisor registered (its start
// and the image's copy into it take minutes), the hostile-workspace suite
// and the isolation tests again with `patina serve --runtime runsc`, and
// measures what each runtime costs.
func TestRunsc(t *testing.T) {
	if testing.Short() {
		t.Skip("runs tests under gVisor on a Docker engine of its own (skipped with -short)")
	}
	if underRunsc() {
		t.Skip("already under runsc")
	}
	e := StartRunscEngine(t)
	// A workspace on gVisor: its kernel is gVisor's, commands run, and a
	// SIGKILL of its init costs it alone.
	t.Run("Workspace", func(t *testing.T) { runUnderRunsc(t, e, "TestRunscKernel", "TestKillInit") })
	t.Run("Hostile", func(t *testing.T) {
		runUnderRunsc(t, e,
			"TestHostileSetuidAndDevices", "TestHostileSessionFiles", "TestHostileAgent",
			"TestHostileShadowedBash", "TestWorkspacesCannotReachEachOther", "TestHostileHugeFiles",
			"TestHostileGitCannotHarmRepository", "TestGitInsideAndExactMerge",
			"TestForgedNoteChangesNothing", "TestHostileAgentToken", "TestHostileGitDeltaBomb")
	})
	// The isolation tests: sessions, environment, terminals, objects, host git.
	t.Run("Isolation", func(t *testing.T) {
		runUnderRunsc(t, e,
			"TestSessionIsolation", "TestSetEnvTwice", "TestHostileTerminal",
			"TestHostileObjectsOfAnotherWorkspace", "TestHostileOtherBranchUnreadable",
			"TestWorkspaceCannotConfigureHostGit")
	})
	t.Run("Bench", func(t *testing.T) { runtimesBench(t, e) })
}

// TestRunscKernel is run by TestRunsc/Workspace under runsc (and on its own,
// under runc, it checks the contrary).
func TestRunscKernel(t *testing.T) {
	h := Start(t)
	ws := h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "kernel"})
	sess := h.CreateSession(ws.ID, pclient.CreateSessionRequest{})
	out := h.Out(ws.ID, sess.ID, "dmesg 2>/dev/null | head -3; cat /proc/version")
	gvisor := strings.Contains(out, "gVisor") || strings.Contains(out, "Starting gVisor")
	if gvisor != underRunsc() {
		t.Fatalf("under runsc %v, exp gVisor's kernel %v; the workspace says:\n%s", underRunsc(), underRunsc(), out)
	}
}

// runtimesBench measures what each runtime costs, same run (patina bench
// --runsc-host): exec p50, create → first exec and idle memory under runc
// (this host's engine) and under runsc (e).
func runtimesBench(t *testing.T, e *SecondEngine) {
	const samples, creates = 300, 3
	var progress bytes.Buffer
	rep, err := bench.Runtimes(context.Background(), bench.RuntimeOptions{
		Binary: Binary(t), RunscHost: "unix://" + e.Socket, Samples: samples, CreateSamples: creates, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var out bytes.Buffer
	_ = rep.WriteText(&out)
	t.Logf("\n%s", out.String())
	for _, r := range []bench.Runtime{rep.Runc, rep.Runsc} {
		if r.Exec.Samples != samples || r.Create.Samples != creates || r.Exec.P50MS <= 0 || r.IdleMemoryBytes <= 0 {
			t.Errorf("%s: exp %d execs, %d creates and a memory figure, got %+v", r.Name, samples, creates, r)
		}
	}
}

// Root in a workspace SIGKILLs its init. Under runc the kernel ignores it
// (pid 1 of its namespace); gVisor 20221219 delivers it, and the workspace
// stops: its own loss only. Either way another workspace carries on, and
// the one that did it starts again with its files.
func TestKillInit(t *testing.T) {
	h := Start(t)
	h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "killer"})
	h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "bystander"})
	h.Out("killer", "default", "echo kept > /workspace/f")
	ctx := context.Background()
	_, _ = h.Client.Exec(ctx, "killer", "default", pclient.ExecRequest{Command: "kill -9 1; sleep 1", TimeoutMS: 10000})
	if !underRunsc() {
		if got := h.Out("killer", "default", "cat /workspace/f"); got != "kept\n" {
			t.Fatalf("exp the workspace alive after kill -9 1, got %q", got)
		}
	} else {
		WaitFor(t, "the workspace stopped", time.Minute, func() bool {
			w, err := h.Client.GetWorkspace(ctx, "killer")
			return err == nil && w.Status == "stopped"
		})
		if _, err := h.Client.StartWorkspace(ctx, "killer"); err != nil {
			t.Fatalf("start it again: %v", err)
		}
		if got := h.Out("killer", "default", "cat /workspace/f"); got != "kept\n" {
			t.Fatalf("exp its files kept, got %q", got)
		}
	}
	h.responsive("bystander")
}
