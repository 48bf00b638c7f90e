package client

import (
	"encoding/json"
	"testing"
)

func TestNetworkPolicyJSON(t *testing.T) {
	for _, tc := range []struct{ in, mode string }{
		{`"none"`, "none"}, {`"open"`, "open"}, {`"bridge"`, "open"},
		{`{"mode":"allow","allow":["a.test"]}`, "allow"},
	} {
		var w NetworkPolicy
		if err := json.Unmarshal([]byte(tc.in), &w); err != nil || w.Mode != tc.mode {
			t.Errorf("%s: exp mode %s, got %+v %v", tc.in, tc.mode, w, err)
		}
	}
	for _, in := range []string{`{"Mode":"open"}`, `{"mode":"open","x":1}`, `3`, `{"mode":3}`} {
		var w NetworkPolicy
		if err := json.Unmarshal([]byte(in), &w); err == nil {
			t.Errorf("%s: exp an error, got %+v", in, w)
		}
	}
}
