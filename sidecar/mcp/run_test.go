package mcpserver

import (
	"strings"
	"testing"
)

func TestMCPCommandRef(t *testing.T) {
	for _, tc := range []struct {
		id, session string
		sid, num    string
		err         string
	}{
		{id: "3", sid: "default", num: "3"},
		{id: "3", session: "build", sid: "build", num: "3"},
		{id: "build:3", sid: "build", num: "3"},
		{id: "build:3", session: "build", sid: "build", num: "3"},
		{id: "default:3", sid: "default", num: "3"},
		{id: "s-1a.b_c:12", sid: "s-1a.b_c", num: "12"},
		{id: "build:3", session: "default", err: `command_id "build:3" is a command of session "build", but session is "default"`},
		{id: "build:3", session: "other", err: "leave session out"},
		{id: ":3", err: "no session before"},
		{id: "build:", err: "no command number after"},
	} {
		t.Run(tc.id+"/"+tc.session, func(t *testing.T) {
			sid, num, err := commandRef(tc.id, tc.session)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("exp an error with %q, got %q %q %v", tc.err, sid, num, err)
				}
				return
			}
			if err != nil || sid != tc.sid || num != tc.num {
				t.Fatalf("exp %q %q, got %q %q %v", tc.sid, tc.num, sid, num, err)
			}
		})
	}
}

// A qualified id resolves back to the command it names.
func TestMCPQualifyID(t *testing.T) {
	for _, tc := range []struct{ sid, num, exp string }{
		{"default", "7", "7"},
		{"build", "7", "build:7"},
		{"s2", "1", "s2:1"},
	} {
		got := qualifyID(tc.sid, tc.num)
		if got != tc.exp {
			t.Errorf("qualifyID(%q, %q): exp %q, got %q", tc.sid, tc.num, tc.exp, got)
		}
		if sid, num, err := commandRef(got, ""); err != nil || sid != tc.sid || num != tc.num {
			t.Errorf("commandRef(%q): exp %q %q, got %q %q %v", got, tc.sid, tc.num, sid, num, err)
		}
	}
}
