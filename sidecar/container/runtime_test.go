package container

import (
	"context"
	"strings"
	"testing"
)

func TestTransportFor(t *testing.T) {
	tests := []struct {
		runtime, transport, exp string
		refused                 bool
	}{
		{"", "auto", "auto", false},
		{RuntimeRunc, "netns", "netns", false},
		{RuntimeRunsc, "auto", "exec", false},
		{RuntimeRunsc, "exec", "exec", false},
		{RuntimeRunsc, "netns", "", true},
	}
	for _, tt := range tests {
		got, err := transportFor(tt.runtime, tt.transport)
		if (err != nil) != tt.refused || got != tt.exp {
			t.Errorf("transportFor(%q, %q): exp %q (refused %v), got %q, %v", tt.runtime, tt.transport, tt.exp, tt.refused, got, err)
		}
	}
}

// A sidecar asked for runsc on an engine that lacks it says so at start,
// with how to register it; its agents are reached by exec.
func TestRuntimeMissing(t *testing.T) {
	d0, cli := testEngine(t, "")
	info, err := cli.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := info.Runtimes[RuntimeRunsc]; ok {
		t.Skip("this engine has runsc registered")
	}
	cfg := d0.cfg
	cfg.Runtime, cfg.Transport = RuntimeRunsc, "auto"
	d, err := New(cli, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d.Transport() != "exec" {
		t.Errorf("exp the exec transport under runsc, got %s", d.Transport())
	}
	err = d.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), `no runtime "runsc"`) || !strings.Contains(err.Error(), "daemon.json") {
		t.Fatalf("exp the missing runtime named, with its cure; got %v", err)
	}
	cfg.Runtime = ""
	if d, err = New(cli, cfg); err != nil || d.Check(context.Background()) != nil {
		t.Fatalf("exp runc's engine accepted: %v", err)
	}
}
