package workspace

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/patina-dev/patina/sidecar/agent/wire"
	"github.com/patina-dev/patina/sidecar/mux"
)

// Limits of port forwarding.
const (
	// MaxForwards is the most ports one workspace forwards.
	MaxForwards = 32
	// MaxForwardConns is the most connections open at once through one
	// forwarded port; more are closed as they arrive.
	MaxForwardConns = 256
	// MaxTunnels is the most connections open at once through all of one
	// workspace's forwarded ports (each a stream of its agent's
	// connection, with its window and copy buffers); more are closed as
	// they arrive.
	MaxTunnels = 1024
)

// portRecord is a forwarded port as workspace.json keeps it, so that a
// restarted sidecar listens again (on the same host port when it is free).
type portRecord struct {
	Port      int       `json:"port"`
	HostPort  int       `json:"host_port"`
	CreatedAt time.Time `json:"created_at"`
}

// forward is a listener on the sidecar's host whose connections are
// tunnelled, each over its own stream of the agent's connection, to a port
// on the workspace's loopback. It does not use the container's network: it
// works with network "none" and with a remote engine.
type forward struct {
	rec    portRecord
	addr   string // host:port as listened on
	ln     net.Listener
	ctx    context.Context // ends the listener and every tunnel
	cancel context.CancelFunc
	sem    chan struct{}
	conns  atomic.Int32
}

func (f *forward) view() PortForward {
	return PortForward{
		Port: f.rec.Port, Address: f.addr, URL: "http://" + f.addr + "/",
		Connections: int(f.conns.Load()), CreatedAt: f.rec.CreatedAt,
	}
}

func (f *forward) close() {
	f.cancel()
	f.ln.Close()
}

// ForwardPort makes a port inside a running workspace reachable on the
// sidecar's host (Config.PortHost, loopback by default). It checks first
// that something listens there (wire.ErrNotListening if not). Forwarding a
// port again returns the forward as it is (created false).
func (m *Manager) ForwardPort(ctx context.Context, idOrName string, req ForwardPortRequest) (PortForward, bool, error) {
	if err := req.Validate(); err != nil {
		return PortForward{}, false, err
	}
	w, ag, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return PortForward{}, false, err
	}
	unlock, err := w.lock(ctx)
	if err != nil {
		return PortForward{}, false, err
	}
	defer unlock()
	w.mu.Lock()
	f, n := w.fwd[req.Port], len(w.fwd)
	w.mu.Unlock()
	if f != nil {
		if req.HostPort != 0 && req.HostPort != f.rec.HostPort {
			return PortForward{}, false, fmt.Errorf("%w: port %d of workspace %s is forwarded at %s already: close that forward first to move it to another host port", ErrExists, req.Port, w.name(), f.addr)
		}
		return f.view(), false, nil
	}
	if n >= MaxForwards {
		return PortForward{}, false, fmt.Errorf("%w: workspace %s forwards %d ports, the most it may", ErrInvalid, w.name(), MaxForwards)
	}
	// Something must listen now: a clear error beats a listener whose
	// every connection closes at once.
	t, err := ag.DialPort(ctx, req.Port)
	if err != nil {
		return PortForward{}, false, w.explain(err)
	}
	t.Close()
	f, err = w.listen(portRecord{Port: req.Port, HostPort: req.HostPort, CreatedAt: time.Now().UTC()})
	if err != nil {
		return PortForward{}, false, err
	}
	w.mu.Lock()
	w.meta.Ports = append(w.meta.Ports, f.rec)
	w.mu.Unlock()
	if err := w.save(ctx); err != nil {
		w.dropForward(req.Port)
		return PortForward{}, false, err
	}
	m.log.Info("port forwarded", "workspace_id", w.id(), "port", req.Port, "address", f.addr)
	return f.view(), true, nil
}

// Ports lists a workspace's forwarded ports, by port.
func (m *Manager) Ports(ctx context.Context, idOrName string) ([]PortForward, error) {
	w, err := m.ready(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	return w.ports(), nil
}

func (w *workspace) ports() []PortForward {
	if p := w.view().Ports; p != nil {
		return p
	}
	return []PortForward{}
}

// ClosePort stops forwarding a port: its listener closes, and so does
// every connection open through it.
func (m *Manager) ClosePort(ctx context.Context, idOrName string, port int) error {
	if err := wire.ValidPort(port); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	_, err := m.lifecycle(ctx, idOrName, func(w *workspace, ctx context.Context) error {
		if !w.dropForward(port) {
			return fmt.Errorf("%w: workspace %s does not forward port %d", ErrNotFound, w.meta.Name, port)
		}
		return w.save(ctx)
	})
	return err
}

// dropForward closes a port's forward and forgets it; false if there was
// none.
func (w *workspace) dropForward(port int) bool {
	w.mu.Lock()
	f := w.fwd[port]
	delete(w.fwd, port)
	recs := w.meta.Ports[:0:0]
	for _, r := range w.meta.Ports {
		if r.Port != port {
			recs = append(recs, r)
		}
	}
	w.meta.Ports = recs
	w.mu.Unlock()
	if f == nil {
		return false
	}
	f.close()
	w.m.log.Info("port forward closed", "workspace_id", w.id(), "port", port)
	return true
}

// closeForwards closes every listener and tunnel (the records stay).
func (w *workspace) closeForwards() {
	w.mu.Lock()
	fs := w.fwd
	w.fwd = nil
	w.mu.Unlock()
	for _, f := range fs {
		f.close()
	}
}

// restoreForwards listens again for the ports workspace.json lists, on the
// same host ports where they are free and on new ones where not (saying so
// in the workspace's notice).
func (w *workspace) restoreForwards(ctx context.Context) {
	w.mu.Lock()
	recs := append([]portRecord(nil), w.meta.Ports...)
	w.mu.Unlock()
	var moved []string
	changed := false
	for _, rec := range recs {
		if wire.ValidPort(rec.Port) != nil {
			continue
		}
		f, err := w.listen(rec)
		if err != nil {
			want := rec.HostPort
			rec.HostPort = 0
			if f, err = w.listen(rec); err != nil {
				w.m.log.Warn("restore a port forward", "workspace_id", w.id(), "port", rec.Port, "err", err)
				continue
			}
			moved = append(moved, fmt.Sprintf("port %d is now forwarded at %s (host port %d was taken)", rec.Port, f.addr, want))
			changed = true
		}
		w.mu.Lock()
		for i := range w.meta.Ports {
			if w.meta.Ports[i].Port == rec.Port {
				w.meta.Ports[i].HostPort = f.rec.HostPort
			}
		}
		w.mu.Unlock()
	}
	if changed {
		w.mu.Lock()
		for _, s := range moved {
			if w.notice != "" {
				w.notice += "; "
			}
			w.notice += s
		}
		w.mu.Unlock()
		if err := w.save(ctx); err != nil {
			w.m.log.Warn("save restored port forwards", "workspace_id", w.id(), "err", err)
		}
	}
}

// listen opens the host listener of a forward and serves it.
func (w *workspace) listen(rec portRecord) (*forward, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(w.m.cfg.PortHost, strconv.Itoa(rec.HostPort)))
	if err != nil {
		if rec.HostPort != 0 {
			return nil, fmt.Errorf("%w: cannot listen on host port %d: %v", ErrExists, rec.HostPort, err)
		}
		return nil, fmt.Errorf("listen for port %d: %w", rec.Port, err)
	}
	rec.HostPort = ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(w.m.bg)
	f := &forward{rec: rec, addr: ln.Addr().String(), ln: ln, ctx: ctx, cancel: cancel, sem: make(chan struct{}, MaxForwardConns)}
	w.mu.Lock()
	if w.deleted {
		w.mu.Unlock()
		f.close()
		return nil, fmt.Errorf("%w: workspace %s was deleted", ErrNotFound, w.meta.Name)
	}
	if w.fwd == nil {
		w.fwd = map[int]*forward{}
	}
	if old := w.fwd[rec.Port]; old != nil {
		old.close()
	}
	w.fwd[rec.Port] = f
	w.mu.Unlock()
	go w.serveForward(f)
	return f, nil
}

// serveForward accepts the forward's connections until it is closed.
func (w *workspace) serveForward(f *forward) {
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			if f.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: wait a little rather than spin.
			select {
			case <-f.ctx.Done():
				return
			case <-time.After(acceptRetryPause):
			}
			continue
		}
		select {
		case f.sem <- struct{}{}:
		default:
			w.m.log.Warn("port forward: too many connections to this port, one closed", "workspace_id", w.id(), "port", f.rec.Port, "max", MaxForwardConns)
			nc.Close()
			continue
		}
		if w.tunnels.Add(1) > MaxTunnels {
			w.tunnels.Add(-1)
			<-f.sem
			w.m.log.Warn("port forward: too many connections to this workspace's ports, one closed", "workspace_id", w.id(), "port", f.rec.Port, "max", MaxTunnels)
			nc.Close()
			continue
		}
		go func() {
			defer func() { <-f.sem; w.tunnels.Add(-1) }()
			w.tunnel(f, nc)
		}()
	}
}

// tunnel carries one host connection to the workspace's port. A stopped
// workspace, or nothing listening, closes the connection.
func (w *workspace) tunnel(f *forward, nc net.Conn) {
	defer nc.Close()
	f.conns.Add(1)
	defer f.conns.Add(-1)
	w.touch()
	defer w.touch()
	if _, err := w.resumeIfIdle(f.ctx); err != nil {
		w.m.log.Warn("port forward: resume the workspace", "workspace_id", w.id(), "port", f.rec.Port, "err", err)
		return
	}
	ag, err := w.client()
	if err != nil {
		w.m.log.Debug("port forward: workspace not running", "workspace_id", w.id(), "port", f.rec.Port, "err", err)
		return
	}
	t, err := ag.DialPort(f.ctx, f.rec.Port)
	if err != nil {
		w.m.log.Debug("port forward: dial inside the workspace", "workspace_id", w.id(), "port", f.rec.Port, "err", err)
		return
	}
	defer t.Close()
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = mux.Splice(tc, t)
	}
}
