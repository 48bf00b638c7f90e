package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coder/websocket"
)

// TerminalOptions open a terminal.
type TerminalOptions struct {
	// Rows and Cols are the terminal's size (default 24x80).
	Rows, Cols int
	// Offset resumes a running terminal's output from this byte offset
	// (what an earlier connection received: its Hello's Offset plus the
	// bytes it read).
	Offset int64
	// Term is TERM for a new terminal (default xterm-256color).
	Term string
}

// Terminal is a WebSocket to a session's terminal.
type Terminal struct {
	ws *websocket.Conn
	// Hello is the server's first message.
	Hello TerminalMessage
}

// TerminalEvent is output, or the terminal's exit.
type TerminalEvent struct {
	Output []byte
	Exit   *TerminalMessage
}

// Terminal opens a session's terminal (GET .../sessions/{sid}/terminal),
// starting one if it has none. Errors before the upgrade are *APIError
// (busy: a command runs; ended; not_found).
func (c *Client) Terminal(ctx context.Context, ws, sid string, o TerminalOptions) (*Terminal, error) {
	q := url.Values{}
	if o.Rows > 0 {
		q.Set("rows", strconv.Itoa(o.Rows))
	}
	if o.Cols > 0 {
		q.Set("cols", strconv.Itoa(o.Cols))
	}
	if o.Offset > 0 {
		q.Set("offset", strconv.FormatInt(o.Offset, 10))
	}
	if o.Term != "" {
		q.Set("term", o.Term)
	}
	u := "ws" + strings.TrimPrefix(c.base, "http") + sessPath(ws, sid) + "/terminal"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	hdr := http.Header{}
	if c.token != "" {
		hdr.Set("Authorization", "Bearer "+c.token)
	}
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: hdr})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, apiErrorOf(resp)
		}
		return nil, fmt.Errorf("terminal: %w", err)
	}
	conn.SetReadLimit(1 << 20)
	t := &Terminal{ws: conn}
	typ, b, err := conn.Read(ctx)
	if err != nil || typ != websocket.MessageText || json.Unmarshal(b, &t.Hello) != nil || t.Hello.Type != "hello" {
		conn.CloseNow()
		return nil, fmt.Errorf("terminal: no hello from the sidecar: %v", err)
	}
	return t, nil
}

// apiErrorOf reads an error answer.
func apiErrorOf(resp *http.Response) error {
	var eb ErrorBody
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, &eb) != nil || eb.Code == "" {
		eb = ErrorBody{Error: strings.TrimSpace(string(b)), Code: "http_" + strconv.Itoa(resp.StatusCode)}
	}
	return &APIError{Status: resp.StatusCode, Code: eb.Code, Message: eb.Error, Field: eb.Field}
}

// Next returns output, or the exit (then io.EOF after it). A connection
// that drops without an exit is an error: reconnect with the offset.
func (t *Terminal) Next(ctx context.Context) (TerminalEvent, error) {
	typ, b, err := t.ws.Read(ctx)
	if err != nil {
		if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
			return TerminalEvent{}, io.EOF
		}
		return TerminalEvent{}, err
	}
	if typ == websocket.MessageBinary {
		return TerminalEvent{Output: b}, nil
	}
	var m TerminalMessage
	if err := json.Unmarshal(b, &m); err != nil || m.Type != "exit" {
		return TerminalEvent{}, fmt.Errorf("terminal: unexpected message %.100q", b)
	}
	return TerminalEvent{Exit: &m}, nil
}

// Write types p.
func (t *Terminal) Write(ctx context.Context, p []byte) error {
	return t.ws.Write(ctx, websocket.MessageBinary, p)
}

// Resize sets the terminal's size.
func (t *Terminal) Resize(ctx context.Context, rows, cols int) error {
	return t.control(ctx, TerminalMessage{Type: "resize", Rows: rows, Cols: cols})
}

// End ends the terminal: its shell is hung up and hands its state back to
// the session; Next returns the rest of the output and the exit.
func (t *Terminal) End(ctx context.Context) error {
	return t.control(ctx, TerminalMessage{Type: "end"})
}

func (t *Terminal) control(ctx context.Context, m TerminalMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return t.ws.Write(ctx, websocket.MessageText, b)
}

// Close detaches: the terminal keeps running on the sidecar for a
// reconnect (60 s by default), then is hung up.
func (t *Terminal) Close() error {
	_ = t.ws.Close(websocket.StatusGoingAway, "detached")
	return nil
}
