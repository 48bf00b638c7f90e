package mcpserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
)

// network_restrict always asks the sidecar to narrow only: the check that
// an agent cannot widen its own policy is the sidecar's.
func TestMCPNetworkRestrictNarrowsOnly(t *testing.T) {
	var got []string
	f := newFakeSidecar(t, func(w http.ResponseWriter, r *http.Request) {
		var p client.NetworkPolicy
		_ = json.NewDecoder(r.Body).Decode(&p)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+p.String())
		if strings.Contains(strings.Join(p.Allow, " "), "wider.test") {
			writeJSON(w, 400, client.ErrorBody{Error: "the change would allow more than the current policy", Code: client.CodeInvalid})
			return
		}
		writeJSON(w, 200, client.Workspace{ID: "w", Name: "w", Network: p})
	})
	cs := connect(t, client.New(f.URL, "tok", nil), Options{})
	if out := mustOK(t, cs, "network_restrict", map[string]any{"workspace": "w", "allow": []string{"pypi.org"}}); !strings.Contains(out, "allow pypi.org") {
		t.Errorf("exp the new policy in the answer, got %q", out)
	}
	mustOK(t, cs, "network_restrict", map[string]any{"workspace": "w", "none": true})
	mustFail(t, cs, "network_restrict", map[string]any{"workspace": "w", "allow": []string{"wider.test"}}, "would allow more")
	exp := []string{
		"PUT /v1/workspaces/w/network?narrow=1 allow pypi.org",
		"PUT /v1/workspaces/w/network?narrow=1 none",
		"PUT /v1/workspaces/w/network?narrow=1 allow wider.test",
	}
	if strings.Join(got, "\n") != strings.Join(exp, "\n") {
		t.Fatalf("exp requests\n%s\ngot\n%s", strings.Join(exp, "\n"), strings.Join(got, "\n"))
	}
}
