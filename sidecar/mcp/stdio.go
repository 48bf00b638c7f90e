package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxLineBytes bounds one line (one JSON-RPC message or batch) read by
// StdioTransport: the SDK's own frame limit.
const MaxLineBytes = mcp.DefaultMaxLineLength

// JSON-RPC 2.0 error codes answered for lines that never reach the server.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// StdioTransport serves MCP over r and w as newline-delimited JSON, like
// mcp.IOTransport, but reads line by line: a line that is not JSON (or a
// truncated one) is answered with a JSON-RPC parse error (-32700), one that
// is JSON but no JSON-RPC message with an invalid request error (-32600), and
// the server reads on. The SDK's transport ends the connection on either,
// and its decoder, which is not line-bound, lets a truncated line swallow
// the next request. Lines longer than MaxLineBytes are answered -32600 and
// skipped.
func StdioTransport(r io.Reader, w io.Writer, log *slog.Logger) mcp.Transport {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &lineTransport{r: r, w: &lockedWriter{w: w}, log: log, max: MaxLineBytes}
}

type lineTransport struct {
	r   io.Reader
	w   *lockedWriter
	log *slog.Logger
	max int
}

// Connect starts the line filter and connects the SDK's transport to it.
func (t *lineTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	pr, pw := io.Pipe()
	go t.filter(pw)
	return (&mcp.IOTransport{Reader: pipeCloser{pr, t.r}, Writer: nopCloser{t.w}, MaxLineLength: -1}).Connect(ctx)
}

// pipeCloser closes the pipe and the input under it (which unblocks the
// filter's read of stdin) when the server ends the session.
type pipeCloser struct {
	*io.PipeReader
	under io.Reader
}

func (p pipeCloser) Close() error {
	if c, ok := p.under.(io.Closer); ok {
		c.Close()
	}
	return p.PipeReader.Close()
}

// filter copies the lines that are JSON-RPC messages to pw and answers the
// others itself. It ends when r ends (closing pw, so the server sees EOF) or
// when the server closed its end of the pipe.
func (t *lineTransport) filter(pw *io.PipeWriter) {
	br := bufio.NewReaderSize(t.r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		tooLong := false
		if len(line)+len(chunk) > t.max {
			tooLong = true
		} else {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			if tooLong {
				line = line[:0]
				// Skip the rest of the line, then answer once.
				for errors.Is(err, bufio.ErrBufferFull) {
					_, err = br.ReadSlice('\n')
				}
				t.reply(nil, codeInvalidRequest, fmt.Sprintf("message longer than %d bytes: split it or send less", t.max))
				if err != nil {
					break
				}
			}
			continue
		}
		if tooLong {
			line = line[:0]
			t.reply(nil, codeInvalidRequest, fmt.Sprintf("message longer than %d bytes: split it or send less", t.max))
		} else if len(bytes.TrimSpace(line)) > 0 {
			if ok := t.check(line); ok {
				msg := line
				if msg[len(msg)-1] != '\n' {
					msg = append(msg, '\n')
				}
				if _, werr := pw.Write(msg); werr != nil {
					return // the server closed the connection
				}
			}
		}
		line = line[:0]
		if err != nil {
			if !errors.Is(err, io.EOF) {
				pw.CloseWithError(err)
				return
			}
			break
		}
	}
	pw.Close()
}

// check reports whether line is a JSON-RPC message or batch the SDK can
// read; if not, it answers the error the sender needs.
func (t *lineTransport) check(line []byte) bool {
	line = bytes.TrimSpace(line)
	if !json.Valid(line) {
		t.log.Warn("mcp: a line that is not JSON", "bytes", len(line))
		t.reply(nil, codeParseError, "parse error: the line is not valid JSON (one JSON-RPC message per line)")
		return false
	}
	if line[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(line, &batch); err != nil || len(batch) == 0 {
			t.reply(nil, codeInvalidRequest, "invalid request: an empty batch")
			return false
		}
		for _, raw := range batch {
			if _, err := jsonrpc.DecodeMessage(raw); err != nil {
				t.reply(idOf(raw), codeInvalidRequest, "invalid request in a batch: "+err.Error())
				return false
			}
		}
		return true
	}
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		t.log.Warn("mcp: a line that is no JSON-RPC message", "err", err)
		t.reply(idOf(line), codeInvalidRequest, "invalid request: "+err.Error())
		return false
	}
	return true
}

// idOf returns the id of a message that has one (null otherwise).
func idOf(raw []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &m) != nil || len(m.ID) == 0 {
		return nil
	}
	switch m.ID[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return m.ID
	}
	return nil
}

// reply writes a JSON-RPC error response.
func (t *lineTransport) reply(id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id}
	resp.Error.Code, resp.Error.Message = code, msg
	data, err := json.Marshal(resp)
	if err != nil {
		return
	}
	if _, err := t.w.Write(append(data, '\n')); err != nil {
		t.log.Warn("mcp: write an error response", "err", err)
	}
}

// lockedWriter keeps the filter's answers and the server's whole-message
// writes from interleaving.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
