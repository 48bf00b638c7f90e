package bench

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	pclient "github.com/patina-dev/patina/sidecar/client"
)

// TargetMemoryPeakBytes bounds the sidecar's RSS peak under each of the
// two loads of a hostile workspace (issue 23: ≤ 100 MB whatever the load).
const TargetMemoryPeakBytes = 100_000_000

// Memory is the sidecar's RSS peak under the two loads a hostile workspace
// can make on its memory: many large answers at once, and many forwarded
// connections that nobody reads. The peaks are sampled every 10 ms.
type Memory struct {
	// BaseBytes is the RSS before the loads, in the run's state then.
	BaseBytes int64 `json:"base_bytes"`
	// Execs commands at once in one workspace, each writing OutputBytes of
	// random bytes to stdout and as many to stderr.
	Execs            int     `json:"execs"`
	OutputBytes      int64   `json:"output_bytes"`
	OutputsMS        float64 `json:"outputs_ms"`
	OutputsPeakBytes int64   `json:"outputs_peak_bytes"`
	// Connections through the workspace's forwarded ports, each asking a
	// server in it for 10 MB and never reading.
	Connections       int   `json:"connections"`
	ForwardsPeakBytes int64 `json:"forwards_peak_bytes"`
}

// peakDuring runs fn and returns the sidecar's largest RSS sampled while
// it ran.
func (p *sidecarProc) peakDuring(fn func() error) (int64, error) {
	var peak int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if n, err := p.rss(); err == nil {
				peak = max(peak, n)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	err := fn()
	close(stop)
	<-done
	return peak, err
}

// memPortBase is the first port of the test servers of the memory loads.
const memPortBase = 3100

// memPerPort is how many of the memory load's connections go to one
// forwarded port (a port takes 256 at once).
const memPerPort = 250

// memory runs both loads in a workspace of their own.
func (r *runner) memory(ctx context.Context) (Memory, error) {
	o := r.o
	m := Memory{Execs: o.MemExecs, OutputBytes: o.MemOutputBytes, Connections: o.MemConnections}
	ws, err := r.createWorkspace(ctx, "bench-memory")
	if err != nil {
		return m, err
	}
	defer r.deleteWorkspace(context.WithoutCancel(ctx), ws.ID)
	sids := make([]string, m.Execs)
	for i := range sids {
		sids[i] = fmt.Sprintf("m%03d", i)
		if _, err := r.c.CreateSession(ctx, ws.ID, pclient.CreateSessionRequest{ID: sids[i]}); err != nil {
			return m, fmt.Errorf("create session %s: %w", sids[i], err)
		}
	}
	if m.BaseBytes, err = r.proc.rss(); err != nil {
		return m, err
	}

	cmd := fmt.Sprintf("head -c %d /dev/urandom; head -c %d /dev/urandom >&2", m.OutputBytes, m.OutputBytes)
	start := time.Now()
	m.OutputsPeakBytes, err = r.proc.peakDuring(func() error {
		var wg sync.WaitGroup
		errs := make(chan error, len(sids))
		for _, sid := range sids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := r.c.Exec(ctx, ws.ID, sid, pclient.ExecRequest{Command: cmd})
				if err == nil && (res.StdoutBytes != m.OutputBytes || res.StderrBytes != m.OutputBytes) {
					err = fmt.Errorf("session %s: %d and %d bytes of output, not %d", sid, res.StdoutBytes, res.StderrBytes, m.OutputBytes)
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
	m.OutputsMS = ms(time.Since(start))
	if err != nil {
		return m, fmt.Errorf("concurrent outputs: %w", err)
	}

	ports := (m.Connections + memPerPort - 1) / memPerPort
	var fwds []pclient.PortForward
	for i := range ports {
		port := memPortBase + i
		if err := r.out(ctx, ws.ID, fmt.Sprintf("nohup /.patina/bin/patina agent test-server --listen 127.0.0.1:%d >/tmp/bench-mem-%d.log 2>&1 &", port, port)); err != nil {
			return m, fmt.Errorf("start a test server: %w", err)
		}
		f, err := r.forwardWhenListening(ctx, ws.ID, port)
		if err != nil {
			return m, err
		}
		fwds = append(fwds, f)
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	m.ForwardsPeakBytes, err = r.proc.peakDuring(func() error {
		for i := range m.Connections {
			c, err := net.DialTimeout("tcp", fwds[i/memPerPort].Address, 10*time.Second)
			if err != nil {
				return err
			}
			conns = append(conns, c)
			if _, err := fmt.Fprintf(c, "GET /bytes?n=10000000 HTTP/1.1\r\nHost: bench\r\n\r\n"); err != nil {
				return err
			}
		}
		// Every connection tunnelled, then time for every window and
		// buffer on the way to fill.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			list, err := r.c.Ports(ctx, ws.ID)
			if err != nil {
				return err
			}
			open := 0
			for _, p := range list {
				open += p.Connections
			}
			if open >= m.Connections {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d connections tunnelled after 2 minutes", open, m.Connections)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Second)
		return nil
	})
	if err != nil {
		return m, fmt.Errorf("unread forwards: %w", err)
	}
	return m, nil
}

// forwardWhenListening forwards port of ws once a server listens on it.
func (r *runner) forwardWhenListening(ctx context.Context, ws string, port int) (pclient.PortForward, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		f, err := r.c.ForwardPort(ctx, ws, pclient.ForwardPortRequest{Port: port})
		if err == nil {
			return f, nil
		}
		if time.Now().After(deadline) {
			return f, fmt.Errorf("forward port %d: %w", port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
