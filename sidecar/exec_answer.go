package sidecar

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"unicode/utf8"

	"github.com/patina-dev/patina/sidecar/workspace"
)

// writeExecAnswer writes a command's result as client.ExecResult's JSON,
// streaming the output fields from the result's bytes instead of building
// the answer in memory (text and base64 of head and tail of two streams
// would be about three times the output). The caller releases res after.
func writeExecAnswer(w http.ResponseWriter, res workspace.ExecResult) {
	meta := execResult(res, false)
	b, err := json.Marshal(meta)
	if err != nil {
		writeError(w, err)
		return
	}
	// meta's empty "stdout" and "stderr" are written below with their text.
	b = bytes.Replace(b, []byte(`"stdout":"","stderr":"",`), nil, 1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.Write(b[:len(b)-1]) // without its closing brace
	fields := []struct {
		name, b64 string
		data      []byte
		always    bool
	}{
		{"stdout", "stdout_base64", res.Stdout.Data, true},
		{"stderr", "stderr_base64", res.Stderr.Data, true},
		{"stdout_tail", "stdout_tail_base64", res.Stdout.Tail, false},
		{"stderr_tail", "stderr_tail_base64", res.Stderr.Tail, false},
	}
	for _, f := range fields {
		if len(f.data) == 0 && !f.always {
			continue
		}
		bw.WriteString(`,"` + f.name + `":`)
		writeJSONText(bw, f.data)
		if !utf8.Valid(f.data) {
			bw.WriteString(`,"` + f.b64 + `":"`)
			enc := base64.NewEncoder(base64.StdEncoding, bw)
			enc.Write(f.data)
			enc.Close()
			bw.WriteByte('"')
		}
	}
	bw.WriteString("}\n")
	_ = bw.Flush()
}

// writeJSONText writes b as a JSON string, invalid UTF-8 as U+FFFD (what
// textAndBase64 gives, escaped as encoding/json escapes it, without HTML
// escaping).
func writeJSONText(w *bufio.Writer, b []byte) {
	const hex = "0123456789abcdef"
	w.WriteByte('"')
	invalid := false // the byte before was invalid: a run gets one U+FFFD
	for len(b) > 0 {
		c := b[0]
		if c < utf8.RuneSelf {
			invalid = false
			switch {
			case c == '"' || c == '\\':
				w.WriteByte('\\')
				w.WriteByte(c)
			case c == '\n':
				w.WriteString(`\n`)
			case c == '\r':
				w.WriteString(`\r`)
			case c == '\t':
				w.WriteString(`\t`)
			case c < 0x20:
				w.WriteString(`\u00`)
				w.WriteByte(hex[c>>4])
				w.WriteByte(hex[c&0xf])
			default:
				w.WriteByte(c)
			}
			b = b[1:]
			continue
		}
		r, size := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && size == 1:
			if !invalid {
				w.WriteString("\ufffd")
			}
			invalid = true
			b = b[1:]
			continue
		case r == '\u2028' || r == '\u2029':
			w.WriteString(`\u202`)
			w.WriteByte(hex[r&0xf])
		default:
			w.Write(b[:size])
		}
		invalid = false
		b = b[size:]
	}
	w.WriteByte('"')
}
