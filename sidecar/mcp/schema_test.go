package mcpserver

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
)

// Issue 26 item 17: closed sets of values are enums, ports have bounds,
// workspace_delete takes workspace, and the tools an agent needs are there.
func TestToolSchemas(t *testing.T) {
	cs := connect(t, client.New("http://127.0.0.1:1", "t", nil), Options{})
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]map[string]map[string]any{}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
		b, _ := json.Marshal(tool.InputSchema)
		var sc struct {
			Properties map[string]map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(b, &sc); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		props[tool.Name] = sc.Properties
	}
	for _, want := range []string{"workspace_stop", "workspace_start", "session_list", "apply"} {
		if !slices.Contains(names, want) {
			t.Errorf("no tool %s in %v", want, names)
		}
	}
	if !slices.Equal(sortedCopy(names), sortedCopy(ToolNames)) {
		t.Errorf("exp the tools %v, got %v", ToolNames, names)
	}
	enum := func(tool, prop string, exp ...any) {
		t.Helper()
		got, _ := props[tool][prop]["enum"].([]any)
		if !slices.Equal(got, exp) {
			t.Errorf("%s.%s: exp enum %v, got %v", tool, prop, exp, got)
		}
	}
	enum("command_output", "stream", "stdout", "stderr")
	enum("command_output", "encoding", "text", "base64")
	enum("command_signal", "signal", "INT", "TERM", "KILL", "HUP", "QUIT", "USR1", "USR2")
	if p := props["port_forward"]["port"]; p["minimum"] != 1.0 || p["maximum"] != 65535.0 {
		t.Errorf("port_forward.port: exp bounds 1..65535, got %v", p)
	}
	if _, ok := props["workspace_delete"]["workspace"]; !ok {
		t.Errorf("workspace_delete takes no workspace: %v", props["workspace_delete"])
	}
	if _, ok := props["run"]["stdin"]; !ok {
		t.Errorf("run takes no stdin: %v", props["run"])
	}
	for _, p := range []string{"env", "memory_mb", "cpus", "pids_limit", "idle_stop", "network_none", "network_allow"} {
		if _, ok := props["workspace_create"][p]; !ok {
			t.Errorf("workspace_create takes no %s", p)
		}
	}
	// A value outside the enum is refused before any call.
	res := call(t, cs, "command_signal", map[string]any{"workspace": "w", "command_id": "1", "signal": "STOP"})
	if !res.IsError {
		t.Errorf("signal STOP: exp a tool error, got %s", textOf(res))
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
