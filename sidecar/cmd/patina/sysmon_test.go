package main

import (
	"context"
	"os"
	"testing"
)

func TestHasSchedtrace(t *testing.T) {
	for in, want := range map[string]bool{
		"":                                 false,
		"http2client=0":                    false,
		"schedtrace=0":                     true,
		"http2client=0, schedtrace=1000":   true,
		"scheddetail=1":                    false,
		"gctrace=1,schedtrace=2147483647,": true,
	} {
		if got := hasSchedtrace(in); got != want {
			t.Errorf("hasSchedtrace(%q) = %v, want %v", in, got, want)
		}
	}
}

// The re-executed serve (which has PATINA_SAVED_GODEBUG) puts the GODEBUG
// it was started with back for its children, and does not re-execute.
func TestKeepSysmonAwakeRestores(t *testing.T) {
	for _, saved := range []string{"", "http2client=0"} {
		t.Setenv("GODEBUG", "x=1,"+sysmonSetting)
		t.Setenv(envSavedGODEBUG, saved)
		keepSysmonAwake(context.Background())
		if _, ok := os.LookupEnv(envSavedGODEBUG); ok {
			t.Errorf("saved %q: %s is still set", saved, envSavedGODEBUG)
		}
		got, ok := os.LookupEnv("GODEBUG")
		if saved == "" && ok {
			t.Errorf("saved empty: GODEBUG = %q, want it unset", got)
		}
		if saved != "" && got != saved {
			t.Errorf("GODEBUG = %q, want %q", got, saved)
		}
	}
}

// A GODEBUG that names schedtrace is the user's choice: no re-execution
// (this test would not come back from one).
func TestKeepSysmonAwakeRespectsUser(t *testing.T) {
	t.Setenv("GODEBUG", "schedtrace=0")
	os.Unsetenv(envSavedGODEBUG)
	keepSysmonAwake(context.Background())
	if got := os.Getenv("GODEBUG"); got != "schedtrace=0" {
		t.Errorf("GODEBUG = %q", got)
	}
}
