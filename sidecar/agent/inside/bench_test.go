package inside

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/patina-dev/patina/session"
	"github.com/patina-dev/patina/session/sessiontest"
	"github.com/patina-dev/patina/sidecar/agent"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// BenchmarkExecTrue: a warm exec of `true` through the agent's protocol
// (client, connection, server, session), against the baseline of the same
// session's own Exec in the same process, alternating, same run.
//
//	go test -run '^$' -bench ExecTrue -benchtime 3000x ./sidecar/agent/inside/
func BenchmarkExecTrue(b *testing.B) {
	dir := b.TempDir()
	work := filepath.Join(dir, "w")
	os.Mkdir(work, 0o755)
	ctx := context.Background()
	procs := &sessiontest.Launcher{} // the shells go at the end
	defer procs.KillAll()
	srv, err := NewServer(ctx, ServerConfig{WorkspaceID: "ws1", Token: "tok", StateDir: filepath.Join(dir, "state"), Workdir: work, Launcher: procs})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	addr := fmt.Sprintf("@patina-agent-bench-%d", time.Now().UnixNano())
	ln, _ := net.Listen("unix", addr)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go srv.Serve(sctx, ln)
	c := agent.NewClient(agent.ClientConfig{WorkspaceID: "ws1", Token: "tok", Dial: func(ctx context.Context) (net.Conn, error) { return net.Dial("unix", addr) }})
	defer c.Close()
	if _, err := c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "true", Ensure: true}, nil); err != nil {
		b.Fatal(err)
	}
	sess, err := srv.sessions.Get("default")
	if err != nil {
		b.Fatal(err)
	}
	var viaAgent, direct []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		res, err := c.Exec(ctx, wire.ExecRequest{Session: "default", Command: "true"}, nil)
		viaAgent = append(viaAgent, time.Since(t0))
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, res)
		}
		t0 = time.Now()
		sres, err := sess.Exec(ctx, session.ExecRequest{Command: "true"})
		direct = append(direct, time.Since(t0))
		if err != nil || sres.ExitCode != 0 {
			b.Fatalf("session exec: %v %+v", err, sres)
		}
	}
	b.StopTimer()
	p50, base := median(viaAgent), median(direct)
	b.ReportMetric(float64(p50)/1e6, "p50-ms")
	b.ReportMetric(float64(base)/1e6, "session-p50-ms")
	b.ReportMetric(float64(p50)/float64(base), "x-session")
	b.Logf("exec true through the agent: p50 %s; the session's own Exec p50 %s (%.2fx)", p50, base, float64(p50)/float64(base))
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
