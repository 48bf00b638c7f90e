package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// A workspace's init, a while after it started the first agent, is a bash
// that only reaps and waits (agent pause --once, then patina-init). Root in the
// workspace, as an attacker: reads its environment (the first agent's
// token was in the init's) and finds nothing; leaves orphans, which are
// reaped (no zombie fills the workspace's pids); sends it every signal a
// shell might handle, and the workspace goes on. A stop through the API
// still ends it by SIGTERM (exit 0, not a kill after the engine's grace
// period), and a start makes it the init again.
func TestHostileInit(t *testing.T) {
	h := Start(t)
	ws := h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "init"})
	h.CreateWorkspace(pclient.CreateWorkspaceRequest{Name: "bystander"})
	// The init becomes bash 2 s after it started the agent (inside's
	// shellInitDelay): polled, with a deadline.
	checkInit := func(when string) {
		t.Helper()
		var got string
		WaitFor(t, when+": PID 1 patina-init", time.Minute, func() bool {
			got = h.Out("init", "default", `tr '\0' ' ' </proc/1/cmdline | cut -c1-15; echo; wc -c </proc/1/environ`)
			return strings.HasPrefix(got, "patina-init -c \n")
		})
		if !strings.HasSuffix(got, "\n0\n") {
			t.Fatalf("%s: exp PID 1 patina-init with an empty environment, got %q", when, got)
		}
	}
	// At once (most likely still patina's init, which becomes bash 2 s
	// after its start) and again later: no signal ends it.
	signalInit := func(when string) {
		t.Helper()
		got := h.Out("init", "default", `for s in KILL HUP QUIT USR1 USR2 PIPE ALRM ABRT CHLD WINCH; do kill -s $s 1; done; sleep 0.5; echo alive`)
		if got != "alive\n" {
			t.Fatalf("%s: exp the workspace alive after signals to its init, got %q", when, got)
		}
	}
	signalInit("created")
	checkInit("created")

	// 50 orphans (each a subshell that exits at once, or after 0.2 s),
	// then a count of zombies.
	got := h.Out("init", "default", `for i in $(seq 50); do ( (sleep 0.2; exit 7) & ); ( (exit 3) & ); done; sleep 1
grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l`)
	if got != "0\n" {
		t.Fatalf("exp every orphan reaped, got %q zombies", got)
	}

	signalInit("bash")
	checkInit("signalled")

	ctx := context.Background()
	if _, err := h.Client.StopWorkspace(ctx, "init"); err != nil {
		t.Fatalf("stop: %v", err)
	}
	info, err := dockerClient(t).ContainerInspect(ctx, ws.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Running || info.State.ExitCode != 0 {
		t.Fatalf("exp the init to end on SIGTERM with exit 0, got running %v exit %d", info.State.Running, info.State.ExitCode)
	}
	if _, err := h.Client.StartWorkspace(ctx, "init"); err != nil {
		t.Fatalf("start: %v", err)
	}
	checkInit("started again")
	h.responsive("bystander")
}
