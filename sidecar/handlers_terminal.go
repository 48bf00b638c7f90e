package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/workspace"
)

// terminalWriteWait bounds one write to a terminal's WebSocket: a client
// that stops reading is cut off (the terminal stays for a reconnect).
const terminalWriteWait = 10 * time.Second

// handleTerminal serves GET …/sessions/{sid}/terminal: a WebSocket
// bridged to the session's terminal in the agent. Errors before the
// upgrade (no such session, busy, ended) are plain HTTP errors.
func (s *Service) handleTerminal(w http.ResponseWriter, r *http.Request) {
	req, err := terminalRequest(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	sid := r.PathValue("sid")
	t, resumed, err := s.mgr.AttachTerminal(r.Context(), r.PathValue("id"), sid, req)
	if err != nil {
		writeError(w, err)
		return
	}
	defer t.Close()
	// The bearer authenticates (before this handler: bearerOK): the token
	// from any page or program; a console key only with the console's own
	// Origin, so a page on another port of the host (a workspace's forward)
	// cannot use one.
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept has answered
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20) // a paste
	ctx := r.Context()
	off := t.Offset()
	if wsWrite(ctx, ws, websocket.MessageText, jsonMsg(client.TerminalMessage{Type: "hello", Session: sid, Offset: &off, Started: t.Started(), Resumed: resumed})) != nil {
		return
	}
	go terminalToClient(ctx, t, ws, func(n int) { s.metrics.Streamed("terminal", n) })
	clientToTerminal(ctx, ws, t)
}

// terminalToClient sends the terminal's output, then its exit, and closes
// the WebSocket normally.
func terminalToClient(ctx context.Context, t workspace.Terminal, ws *websocket.Conn, sent func(int)) {
	for {
		ev, err := t.Next()
		if err != nil {
			_ = ws.Close(websocket.StatusInternalError, "the workspace's agent is unavailable")
			return
		}
		if ev.Exit != nil {
			code := ev.Exit.ExitCode
			_ = wsWrite(ctx, ws, websocket.MessageText, jsonMsg(client.TerminalMessage{Type: "exit", ExitCode: &code, Reason: ev.Exit.Reason}))
			_ = ws.Close(websocket.StatusNormalClosure, "the terminal ended")
			return
		}
		if wsWrite(ctx, ws, websocket.MessageBinary, ev.Output) != nil {
			ws.CloseNow()
			return
		}
		sent(len(ev.Output))
	}
}

// clientToTerminal applies the client's input and control messages until
// it goes away (which detaches: the terminal stays for a reconnect).
func clientToTerminal(ctx context.Context, ws *websocket.Conn, t workspace.Terminal) {
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageText {
			if m, ok := controlMessage(data); ok {
				switch m.Type {
				case "resize":
					err = t.Resize(m.Rows, m.Cols)
				case "end":
					err = t.End()
				}
				if err != nil {
					_ = ws.Close(websocket.StatusPolicyViolation, err.Error())
					return
				}
				continue
			}
		}
		if t.Input(data) != nil {
			return
		}
	}
}

// controlMessage reads a text message that is exactly a resize or end
// object; anything else is input.
func controlMessage(data []byte) (client.TerminalMessage, bool) {
	var m client.TerminalMessage
	if len(data) == 0 || data[0] != '{' {
		return m, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if dec.Decode(&m) != nil || (m.Type != "resize" && m.Type != "end") {
		return m, false
	}
	return m, true
}

// terminalRequest reads ?rows=&cols=&offset=&term= (default 24x80).
func terminalRequest(q url.Values) (workspace.TerminalRequest, error) {
	req := workspace.TerminalRequest{Rows: 24, Cols: 80, Term: q.Get("term")}
	for _, p := range []struct {
		name string
		dst  *int
	}{{"rows", &req.Rows}, {"cols", &req.Cols}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > workspace.MaxTerminalSize {
				return req, fmt.Errorf("%w: %s must be a number from 1 to %d, got %q", errInvalid, p.name, workspace.MaxTerminalSize, v)
			}
			*p.dst = n
		}
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return req, fmt.Errorf("%w: offset must be a byte offset (0 or more), got %q", errInvalid, v)
		}
		req.Offset = n
	}
	return req, nil
}

func wsWrite(ctx context.Context, ws *websocket.Conn, typ websocket.MessageType, p []byte) error {
	ctx, cancel := context.WithTimeout(ctx, terminalWriteWait)
	defer cancel()
	return ws.Write(ctx, typ, p)
}

func jsonMsg(m client.TerminalMessage) []byte {
	b, _ := json.Marshal(m)
	return b
}
