package image

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/distribution/reference"
)

func TestEnsure(t *testing.T) {
	pullStream := `{"status":"Pulling from patina/x","id":"v1"}
{"status":"Pulling fs layer","id":"abc"}
{"status":"Downloading","progressDetail":{"current":1,"total":10},"id":"abc"}
{"status":"Downloading","progressDetail":{"current":5,"total":10},"id":"abc"}
{"status":"Pull complete","id":"abc"}
{"status":"Status: Downloaded newer image for patina/x:v1"}
`
	tests := []struct {
		name     string
		ref      string
		api      func() *fakeAPI
		exp      error    // errors.Is target; nil: success
		expMsg   []string // substrings of the error
		notMsg   string
		expPulls int
		expLog   []string // substrings of the info log
	}{
		{name: "present", ref: "patina/x:v1", api: func() *fakeAPI { return newFakeAPI("patina/x:v1") }},
		{name: "default ref when empty, present", api: func() *fakeAPI { return newFakeAPI(DefaultTag) }},
		{name: "pulled", ref: "patina/x:v1", expPulls: 1,
			api: func() *fakeAPI {
				f := newFakeAPI()
				f.pullBody = func(context.Context) io.ReadCloser { return io.NopCloser(strings.NewReader(pullStream)) }
				return f
			},
			expLog: []string{"status=\"Pulling fs layer\"", "status=\"Pull complete\"", "Downloaded newer image"}},
		{name: "default missing", ref: "", expPulls: 1, exp: ErrMissing,
			api: func() *fakeAPI {
				f := newFakeAPI()
				f.pullErr = errors.New("dial tcp: lookup registry.example.invalid: no such host")
				return f
			},
			expMsg: []string{"image missing: patina/base:bookworm is not present and could not be pulled (dial tcp", "run `patina image build`"}},
		{name: "default missing, long name", ref: fullName(DefaultTag), expPulls: 1, exp: ErrMissing,
			api:    func() *fakeAPI { return newFakeAPI() },
			expMsg: []string{"run `patina image build`"}},
		{name: "other missing", ref: "patina/does-not-exist:never", expPulls: 1, exp: ErrMissing,
			api:    func() *fakeAPI { return newFakeAPI() },
			expMsg: []string{"patina/does-not-exist:never is not present and could not be pulled (fake: no registry)", "build or load it"},
			notMsg: "patina image build"},
		{name: "error in the pull stream", ref: "patina/x:v1", expPulls: 1, exp: ErrMissing,
			api: func() *fakeAPI {
				f := newFakeAPI()
				f.pullBody = func(context.Context) io.ReadCloser {
					return io.NopCloser(strings.NewReader(`{"status":"Pulling from patina/x"}` + "\n" +
						`{"errorDetail":{"message":"manifest unknown"},"error":"manifest unknown"}` + "\n"))
				}
				return f
			},
			expMsg: []string{"(manifest unknown)"}},
		{name: "stalled pull", ref: "patina/x:v1", expPulls: 1, exp: errPullStalled,
			api: func() *fakeAPI {
				f := newFakeAPI()
				f.pullBody = func(ctx context.Context) io.ReadCloser { return blockingReader{ctx} }
				return f
			},
			expMsg: []string{"image missing", "pull stalled: no progress for 20ms"}},
		{name: "inspect fails", ref: "patina/x:v1", exp: io.ErrUnexpectedEOF,
			api: func() *fakeAPI {
				f := newFakeAPI()
				f.inspectFn = func(string) error { return io.ErrUnexpectedEOF }
				return f
			},
			notMsg: "image missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := tt.api()
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			m := New(Config{PullIdleTimeout: 20 * time.Millisecond}, api, nil)
			err := m.Ensure(context.Background(), EnsureRequest{Ref: tt.ref, Logger: logger})
			if tt.exp == nil && err != nil {
				t.Fatalf("exp success, got %v", err)
			}
			if tt.exp != nil && !errors.Is(err, tt.exp) {
				t.Fatalf("exp %v, got %v", tt.exp, err)
			}
			for _, s := range tt.expMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("exp error containing %q, got %q", s, err)
				}
			}
			if tt.notMsg != "" && strings.Contains(err.Error(), tt.notMsg) {
				t.Errorf("exp error without %q, got %q", tt.notMsg, err)
			}
			if len(api.pulls) != tt.expPulls {
				t.Errorf("exp %d pulls, got %v", tt.expPulls, api.pulls)
			}
			for _, s := range tt.expLog {
				if !strings.Contains(logs.String(), s) {
					t.Errorf("exp log containing %q, got:\n%s", s, logs.String())
				}
			}
			if strings.Contains(logs.String(), "current=") {
				t.Errorf("exp repeated statuses below info level, got:\n%s", logs.String())
			}
		})
	}
}

// TestEnsureCancelled: a caller that gives up gets its context's error, not
// ErrMissing (which would send the user off to build an image).
func TestEnsureCancelled(t *testing.T) {
	api := newFakeAPI()
	ctx, cancel := context.WithCancel(context.Background())
	api.pullBody = func(pctx context.Context) io.ReadCloser {
		cancel()
		return blockingReader{pctx}
	}
	err := New(Config{}, api, nil).Ensure(ctx, EnsureRequest{Ref: "patina/x:v1"})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrMissing) {
		t.Fatalf("exp context.Canceled and not ErrMissing, got %v", err)
	}
}

// TestEnsurePullTimeout: the overall bound applies even while progress flows.
func TestEnsurePullTimeout(t *testing.T) {
	api := newFakeAPI()
	api.pullBody = func(ctx context.Context) io.ReadCloser { return blockingReader{ctx} }
	err := New(Config{PullTimeout: 20 * time.Millisecond}, api, nil).Ensure(context.Background(), EnsureRequest{Ref: "patina/x:v1"})
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "pull took longer than 20ms") {
		t.Fatalf("exp ErrMissing after the pull timeout, got %v", err)
	}
}

// TestEnsureMissingDocker asks the real engine for an image that exists
// nowhere. Here no registry is reachable; elsewhere the registry refuses it.
func TestEnsureMissingDocker(t *testing.T) {
	cli := dockerClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	start := time.Now()
	err := New(Config{}, cli, logger).Ensure(ctx, EnsureRequest{Ref: "patina/does-not-exist:never"})
	if !errors.Is(err, ErrMissing) {
		t.Fatalf("exp ErrMissing, got %v", err)
	}
	t.Logf("Ensure failed in %s with: %v", time.Since(start).Round(time.Millisecond), err)
	for _, s := range []string{"patina/does-not-exist:never is not present and could not be pulled", "build or load it"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("exp error containing %q, got %q", s, err)
		}
	}
	if !strings.Contains(logs.String(), "pulling") {
		t.Errorf("exp the pull attempt logged, got:\n%s", logs.String())
	}
}

// fullName spells ref with its registry host, as the engine may report it.
func fullName(ref string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		panic(err)
	}
	return named.String()
}
