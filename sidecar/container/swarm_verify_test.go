package container

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/swarm"
)

// What a node's check task says becomes a reason in the operator's terms.
func TestCheckResult(t *testing.T) {
	task := func(state swarm.TaskState, exit int, msg string) swarm.Task {
		return swarm.Task{Status: swarm.TaskStatus{State: state, Err: msg, ContainerStatus: &swarm.ContainerStatus{ExitCode: exit}}}
	}
	for _, tc := range []struct {
		name string
		task swarm.Task
		done bool
		exp  string // "" for a pass, else a part of the reason
	}{
		{"running", task(swarm.TaskStateRunning, 0, ""), false, ""},
		{"passed", task(swarm.TaskStateComplete, 0, ""), true, ""},
		{"another binary", task(swarm.TaskStateFailed, checkExitDiffers, "task: non-zero exit (3)"), true, "is not this sidecar's"},
		{"no binary", task(swarm.TaskStateFailed, checkExitMissing, "task: non-zero exit (4)"), true, "no patina binary at /nb"},
		{"crashed", task(swarm.TaskStateFailed, 2, "task: non-zero exit (2)"), true, "its binary check failed: failed: task: non-zero exit (2)"},
		{"no agent image", task(swarm.TaskStateRejected, 0, "No such image: sha256:abc"), true, "run `patina image agent --binary /nb` there"},
		{"no bind source", task(swarm.TaskStateRejected, 0, `invalid mount config for type "bind": bind source path does not exist: /nb`), true, "no patina binary at /nb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, done := checkResult(tc.task, "/nb", "patina/agent:0123", "sha256:0123456789abcdef")
			if done != tc.done || (tc.exp == "") != (why == "") || !strings.Contains(why, tc.exp) {
				t.Fatalf("exp done=%v and %q, got done=%v and %q", tc.done, tc.exp, done, why)
			}
		})
	}
}
