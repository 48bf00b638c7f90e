package sidecar

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/workspace"
)

// The streamed answer decodes to what encoding/json makes of the same
// result, for text, control characters, invalid UTF-8 and tails.
func TestWriteExecAnswerMatchesJSON(t *testing.T) {
	big := bytes.Repeat([]byte("héllo \"wörld\"\\ \t\r\n\x00\x1f\u2028 <&> "), 5000)
	cases := map[string]workspace.ExecResult{
		"empty": {CommandID: "c1", ExitCode: 0},
		"text":  {CommandID: "c2", ExitCode: 3, Stdout: workspace.ExecOutput{Data: []byte("hi\n"), Size: 3}, Stderr: workspace.ExecOutput{Data: []byte("oops"), Size: 4}},
		"binary": {CommandID: "c3", Stdout: workspace.ExecOutput{Data: []byte{0xff, 'a', 0xc3, 0x28, 0xe2, 0x82}, Size: 6},
			Stderr: workspace.ExecOutput{Data: big, Size: int64(len(big))}},
		"tails": {CommandID: "c4", Stdout: workspace.ExecOutput{Data: big, Tail: []byte("end\xfe"), Size: 1 << 30, Truncated: true},
			Stderr: workspace.ExecOutput{Data: []byte("e"), Tail: []byte("t"), Size: 1 << 20, Truncated: true}, Notice: "n", Cwd: "/w",
			StartedAt: time.Unix(1, 0), EndedAt: time.Unix(2, 500)},
	}
	for name, res := range cases {
		t.Run(name, func(t *testing.T) {
			res.Resumed = name == "text"
			exp := execResult(res, true)
			rec := httptest.NewRecorder()
			writeExecAnswer(rec, res)
			if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("exp 200 application/json, got %d %q", rec.Code, rec.Header().Get("Content-Type"))
			}
			if !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("not valid JSON: %.200q", rec.Body.String())
			}
			dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
			dec.DisallowUnknownFields()
			var got client.ExecResult
			if err := dec.Decode(&got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(exp, got) {
				t.Fatalf("exp %+v\ngot %+v", exp, got)
			}
			var keys map[string]json.RawMessage
			_ = json.Unmarshal(rec.Body.Bytes(), &keys)
			if _, ok := keys["stdout"]; !ok {
				t.Fatal(`exp "stdout" always present`)
			}
		})
	}
}

// FuzzWriteExecAnswer: whatever bytes a workspace prints, the streamed
// answer is valid JSON and says what encoding/json would.
func FuzzWriteExecAnswer(f *testing.F) {
	f.Add([]byte("hi\n"), []byte{0xff, 0xfe, '"', '\\'})
	f.Add([]byte("\u2028\x00\x7f\xed\xa0\x80"), []byte("\xf4\x90\x80\x80 é"))
	f.Fuzz(func(t *testing.T, out, tail []byte) {
		res := workspace.ExecResult{CommandID: "1", Stdout: workspace.ExecOutput{Data: out, Size: int64(len(out) + len(tail))},
			Stderr: workspace.ExecOutput{Data: tail, Tail: out, Size: int64(len(out) + len(tail)), Truncated: len(out) > 0}}
		rec := httptest.NewRecorder()
		writeExecAnswer(rec, res)
		var got client.ExecResult
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("invalid JSON %q: %v", rec.Body.String(), err)
		}
		if exp := execResult(res, true); !reflect.DeepEqual(exp, got) {
			t.Fatalf("exp %+v\ngot %+v", exp, got)
		}
	})
}
