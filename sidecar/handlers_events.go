package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// Timings and bounds of GET /v1/events.
const (
	// eventsPoll is how often the workspaces are compared with what a
	// stream last sent (an in-memory list: cheap).
	eventsPoll = 250 * time.Millisecond
	// sessionsPoll is how often a workspace's sessions are asked of its
	// agent for a stream with ?workspace=.
	sessionsPoll = 500 * time.Millisecond
	// eventsKeepAlive is how often an idle stream gets a comment line.
	eventsKeepAlive = 15 * time.Second
	// maxEventStreams bounds the streams open at once (each polls).
	maxEventStreams = 64
	// eventWriteWait bounds one write to a stream's client.
	eventWriteWait = 10 * time.Second
	// sessionsPeekTimeout bounds one ask of a workspace's sessions: an
	// agent that hangs costs the stream that poll, not the stream.
	sessionsPeekTimeout = 10 * time.Second
)

// handleEvents serves GET /v1/events: server-sent events of the
// workspaces (and, with ?workspace=, of one workspace's sessions) until the
// client goes away. See client.WorkspaceDeleted for the events.
func (s *Service) handleEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	wsID := r.URL.Query().Get("workspace")
	if wsID != "" {
		if _, err := s.mgr.Get(wsID); err != nil {
			writeError(w, err)
			return
		}
	}
	select {
	case s.eventSlots <- struct{}{}:
		defer func() { <-s.eventSlots }()
	default:
		w.Header().Set("Retry-After", "5")
		writeError(w, fmt.Errorf("%w: %d event streams are open already; close a console tab", errUnavailable, maxEventStreams))
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, v any) bool {
		b, _ := json.Marshal(v)
		_ = rc.SetWriteDeadline(time.Now().Add(eventWriteWait))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}

	seen := map[string][]byte{}
	list := workspaceViews(s.mgr.List())
	for _, ws := range list {
		seen[ws.ID], _ = json.Marshal(ws)
	}
	if !send("snapshot", list) {
		return
	}
	var lastSessions []byte
	sessions := func() bool {
		if wsID == "" {
			return true
		}
		sctx, cancel := context.WithTimeout(ctx, sessionsPeekTimeout)
		infos, err := s.mgr.PeekSessions(sctx, wsID)
		cancel()
		if err != nil {
			return ctx.Err() == nil // a stopped workspace has no sessions to show now
		}
		out := make([]client.Session, 0, len(infos))
		for _, inf := range infos {
			out = append(out, sessionView(inf))
		}
		b, _ := json.Marshal(out)
		if bytes.Equal(b, lastSessions) {
			return true
		}
		lastSessions = b
		return send("sessions", out)
	}
	if !sessions() {
		return
	}
	tick := time.NewTicker(eventsPoll)
	defer tick.Stop()
	stick := time.NewTicker(sessionsPoll)
	defer stick.Stop()
	alive := time.NewTicker(eventsKeepAlive)
	defer alive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-alive.C:
			_ = rc.SetWriteDeadline(time.Now().Add(eventWriteWait))
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-stick.C:
			if !sessions() {
				return
			}
		case <-tick.C:
			now := map[string]bool{}
			for _, ws := range workspaceViews(s.mgr.List()) {
				now[ws.ID] = true
				b, _ := json.Marshal(ws)
				if bytes.Equal(b, seen[ws.ID]) {
					continue
				}
				seen[ws.ID] = b
				if !send("workspace", ws) {
					return
				}
			}
			for id := range seen {
				if !now[id] {
					delete(seen, id)
					if !send("workspace_deleted", client.WorkspaceDeleted{ID: id}) {
						return
					}
				}
			}
		}
	}
}
