package sidecar

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/workspace"
	"github.com/patina-dev/patina/worktree"
)

func TestFilesPath(t *testing.T) {
	cases := []struct {
		path, id, rest string
		ok             bool
	}{
		{"/v1/workspaces/w/files", "w", "", true},
		{"/v1/workspaces/w/files/", "w", "", true},
		{"/v1/workspaces/w/files/a/b.txt", "w", "a/b.txt", true},
		{"/v1/workspaces/w/files/../../etc", "w", "../../etc", true},
		{"/v1/workspaces/w/diff", "", "", false},
		{"/v1/workspaces//files/x", "", "", false},
		{"/v2/workspaces/w/files/x", "", "", false},
	}
	for _, c := range cases {
		id, rest, ok := filesPath(c.path)
		if ok != c.ok || id != c.id || rest != c.rest {
			t.Errorf("%s: exp %q %q %v, got %q %q %v", c.path, c.id, c.rest, c.ok, id, rest, ok)
		}
	}
}

func TestCleanPath(t *testing.T) {
	good := map[string]string{"": ".", "a": "a", "a/b/": "a/b", "a//b": "a/b", "./a": "a", ".hidden": ".hidden", "a/./b": "a/b"}
	for in, exp := range good {
		got, err := workspace.CleanPath(in)
		if err != nil || got != exp {
			t.Errorf("%q: exp %q, got %q %v", in, exp, got, err)
		}
	}
	for _, in := range []string{"..", "../x", "a/../../x", "a/..", "x\x00y"} {
		if _, err := workspace.CleanPath(in); !errors.Is(err, wire.ErrEscapes) {
			t.Errorf("%q: exp ErrEscapes, got %v", in, err)
		}
	}
}

func TestStatusMapping(t *testing.T) {
	cases := []struct {
		err  error
		code int
		name string
	}{
		{errUnauthorized, 401, client.CodeUnauthorized},
		{errTooLarge, 413, client.CodeTooLarge},
		{wire.ErrEscapes, 400, client.CodeInvalid},
		{agent.ErrUnavailable, 503, client.CodeAgentUnavailable},
		{workspace.ErrAdopting, 503, client.CodeAdopting},
		{workspace.ErrUnsupported, 400, client.CodeInvalid},
		{worktree.ErrRejected, 422, client.CodeRejected},
		{wire.ErrTooLarge, 413, client.CodeTooLarge},
		{session.ErrInvalid, 400, client.CodeInvalid},
		{worktree.ErrInvalidName, 400, client.CodeInvalid},
		{session.ErrNotFound, 404, client.CodeNotFound},
		{worktree.ErrNotFound, 404, client.CodeNotFound},
		{session.ErrBusy, 409, client.CodeBusy},
		{&session.EndedError{ExitCode: 3}, 409, client.CodeEnded},
		{workspace.ErrStopped, 409, client.CodeStopped},
		{session.ErrNotRunning, 409, client.CodeNotRunning},
		{workspace.ErrNoRepository, 409, client.CodeNoRepository},
		{worktree.ErrConflict, 409, client.CodeConflict},
		{worktree.ErrDirty, 409, client.CodeConflict},
		{errors.New("boom"), 500, client.CodeInternal},
	}
	for _, c := range cases {
		code, name := status(c.err)
		if code != c.code || name != c.name {
			t.Errorf("%v: exp %d %s, got %d %s", c.err, c.code, c.name, code, name)
		}
	}
}

func decodeInto(body []byte, v any, limit int64, optional bool) error {
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	return decode(httptest.NewRecorder(), r, v, limit, optional)
}

func TestDecode(t *testing.T) {
	var req client.ExecRequest
	if err := decodeInto([]byte(`{"command":"ls","timeout_ms":5,"async":true}`), &req, 1<<20, false); err != nil || req.Command != "ls" || !req.Async {
		t.Fatalf("got %+v %v", req, err)
	}
	for body, target := range map[string]error{
		`{"command":`:                        errInvalid,
		`{"nope":1}`:                         errInvalid,
		`{"command":"a"} x`:                  errInvalid,
		``:                                   errInvalid,
		`"` + strings.Repeat("x", 200) + `"`: errTooLarge,
	} {
		var r client.ExecRequest
		if err := decodeInto([]byte(body), &r, 100, false); !errors.Is(err, target) {
			t.Errorf("%.20q: exp %v, got %v", body, target, err)
		}
	}
	var opt client.MergeRequest
	if err := decodeInto(nil, &opt, 100, true); err != nil {
		t.Fatalf("optional empty body: %v", err)
	}
}

func TestExecRequest(t *testing.T) {
	in := "x"
	if _, err := execRequest(client.ExecRequest{Command: "cat", Stdin: &in, StdinBase64: "eA=="}); !errors.Is(err, errInvalid) {
		t.Fatalf("exp stdin and stdin_base64 together refused, got %v", err)
	}
	r, err := execRequest(client.ExecRequest{Command: "cat", StdinBase64: "AP8=", TimeoutMS: 1500})
	if err != nil || !bytes.Equal(r.Stdin, []byte{0, 0xff}) || r.Timeout.Milliseconds() != 1500 {
		t.Fatalf("got %+v %v", r, err)
	}
}

func TestTextAndBase64(t *testing.T) {
	if txt, b64 := textAndBase64([]byte("héllo\n")); txt != "héllo\n" || b64 != "" {
		t.Fatalf("valid UTF-8: %q %q", txt, b64)
	}
	txt, b64 := textAndBase64([]byte("a\xffb"))
	if txt != "a\uFFFDb" || b64 != "Yf9i" {
		t.Fatalf("invalid UTF-8: %q %q", txt, b64)
	}
}

// Fuzz the JSON decoding of every request body the API takes: it must
// never panic, and anything it accepts must be one JSON object of the
// right shape.
func FuzzDecodeRequests(f *testing.F) {
	for _, seed := range []string{
		`{"command":"ls","timeout_ms":100,"stdin":"x","async":true}`,
		`{"name":"w","repo":"/r","base":"main","env":{"A":"1"},"memory_mb":512,"cpus":1.5,"network":"none"}`,
		`{"id":"s","cwd":"/tmp","env":{"K":"V"}}`,
		`{"env":{"A":"1"},"unset":["B"]}`,
		`{"signal":"INT"}`, `{"message":"m"}`, `{"into":"main"}`,
		`{`, `[]`, `null`, `{"command":"\u0000"}`, `{"a":1}{"b":2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		targets := []any{
			&client.ExecRequest{}, &client.CreateWorkspaceRequest{}, &client.CreateSessionRequest{},
			&client.SetEnvRequest{}, &client.SignalRequest{}, &client.CommitRequest{}, &client.MergeRequest{},
		}
		for _, v := range targets {
			err := decodeInto(body, v, 1<<16, false)
			if err != nil && !errors.Is(err, errInvalid) && !errors.Is(err, errTooLarge) {
				t.Fatalf("decode %T: unclassified error %v", v, err)
			}
			if req, ok := v.(*client.ExecRequest); ok && err == nil {
				_, _ = execRequest(*req) // must not panic either
			}
		}
	})
}

// GET /v1/identify proves the token without sending it; a nonce that is
// not hex is refused.
func TestIdentify(t *testing.T) {
	s := &Service{token: "the-token"}
	nonce := strings.Repeat("ab", 16)
	w := httptest.NewRecorder()
	s.handleIdentify(w, httptest.NewRequest(http.MethodGet, client.IdentifyPath+"?nonce="+nonce, nil))
	var id client.Identity
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &id) != nil || id.Proof != client.IdentityProof("the-token", nonce) {
		t.Fatalf("exp the proof, got %d %s", w.Code, w.Body)
	}
	if strings.Contains(w.Body.String(), "the-token") {
		t.Fatal("the answer holds the token")
	}
	for _, bad := range []string{"", "xyz", strings.Repeat("a", 31), strings.Repeat("a", 129), strings.Repeat("AB", 16)} {
		w := httptest.NewRecorder()
		s.handleIdentify(w, httptest.NewRequest(http.MethodGet, client.IdentifyPath+"?nonce="+bad, nil))
		if w.Code != http.StatusBadRequest {
			t.Errorf("nonce %q: exp 400, got %d", bad, w.Code)
		}
	}
}
