package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// rpcAnswer is one line the server wrote.
type rpcAnswer struct {
	ID    json.RawMessage `json:"id"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Result json.RawMessage `json:"result"`
}

// A malformed line is answered and the server reads on; a truncated line
// does not swallow the request on the next line.
func TestStdioTransportBadLines(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- New(client.New("http://127.0.0.1:1", "t", nil), Options{}).Run(ctx, StdioTransport(inR, outW, nil))
	}()
	answers := make(chan rpcAnswer, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var a rpcAnswer
			if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
				t.Errorf("server wrote a line that is not JSON: %q", sc.Text())
				continue
			}
			answers <- a
		}
	}()
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("write %q: %v", line, err)
		}
	}
	next := func(what string) rpcAnswer {
		t.Helper()
		select {
		case a := <-answers:
			return a
		case err := <-done:
			t.Fatalf("%s: the server ended: %v", what, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no answer in 30 s", what)
		}
		return rpcAnswer{}
	}
	wantErr := func(what string, code int, id string) {
		t.Helper()
		a := next(what)
		if a.Error == nil || a.Error.Code != code || string(a.ID) != id {
			t.Fatalf("%s: exp error %d with id %s, got %+v (id %s)", what, code, id, a.Error, a.ID)
		}
	}

	send(`not json at all`)
	wantErr("not json", -32700, "null")
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	if a := next("initialize"); string(a.ID) != "1" || a.Error != nil || !strings.Contains(string(a.Result), `"patina"`) {
		t.Fatalf("initialize: got id %s error %+v result %s", a.ID, a.Error, a.Result)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/li`) // truncated
	wantErr("truncated", -32700, "null")
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	if a := next("tools/list"); string(a.ID) != "3" || a.Error != nil || !strings.Contains(string(a.Result), `"workspace_create"`) {
		t.Fatalf("tools/list after a truncated line: got id %s error %+v", a.ID, a.Error)
	}
	send(`{"jsonrpc":"1.0","id":4,"method":"tools/list"}`)
	wantErr("wrong version", -32600, "4")
	send(`42`)
	wantErr("a number", -32600, "null")
	send(`[]`)
	wantErr("an empty batch", -32600, "null")
	send(``)
	send(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
	if a := next("tools/list at the end"); string(a.ID) != "5" || a.Error != nil {
		t.Fatalf("tools/list at the end: got id %s error %+v", a.ID, a.Error)
	}
	inW.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not end when its input ended")
	}
}

// A line longer than the bound is answered and skipped.
func TestStdioTransportLongLine(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	tr := StdioTransport(inR, outW, nil).(*lineTransport)
	tr.max = 100
	pr, pw := io.Pipe()
	go tr.filter(pw)
	go func() {
		io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"`+strings.Repeat("y", 200<<10)+`"}}`+"\n")
		io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"x"}`+"\n")
		inW.Close()
	}()
	forwarded := make(chan string, 1)
	go func() { b, _ := io.ReadAll(pr); forwarded <- string(b) }()
	sc := bufio.NewScanner(outR)
	if !sc.Scan() || !strings.Contains(sc.Text(), `-32600`) || !strings.Contains(sc.Text(), "longer than 100 bytes") {
		t.Fatalf("exp a -32600 answer naming the bound, got %q", sc.Text())
	}
	if got, exp := <-forwarded, `{"jsonrpc":"2.0","id":2,"method":"x"}`+"\n"; got != exp {
		t.Fatalf("exp only the second line forwarded %q, got %q", exp, got)
	}
}
