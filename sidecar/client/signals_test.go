package client

import "testing"

func TestSignalName(t *testing.T) {
	for in, want := range map[string]string{"int": "INT", "SIGTERM": "TERM", " Kill ": "KILL", "sigusr2": "USR2"} {
		if got, ok := SignalName(in); !ok || got != want {
			t.Errorf("SignalName(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "STOP", "SIGSTOP", "9", "SIGSIGINT"} {
		if got, ok := SignalName(in); ok {
			t.Errorf("SignalName(%q) = %q, want none", in, got)
		}
	}
}
