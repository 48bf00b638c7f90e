package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Bounds of an HTTP request's head.
const (
	maxHeadLine  = 16 << 10
	maxHead      = 64 << 10
	firstHeadBy  = 10 * time.Second
	idleHeadWait = 2 * time.Minute
)

var errHead = errors.New("malformed request")

// head is a request's head as it came, and what patina reads from it.
type head struct {
	raw      []byte
	method   string
	host     string // the Host, lower case, without its port
	proto    string
	chunked  bool
	length   int64
	upgrade  string // the Upgrade header, lower case
	absolute bool
}

// readHead reads one request head (up to the empty line), bounded.
func readHead(br *bufio.Reader) (*head, error) {
	var raw []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: a header line longer than %d bytes", errHead, maxHeadLine)
		}
		if err != nil {
			if len(raw) == 0 && len(line) == 0 {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errHead, err)
		}
		raw = append(raw, line...)
		if len(raw) > maxHead {
			return nil, fmt.Errorf("%w: a head longer than %d bytes", errHead, maxHead)
		}
		if len(line) <= 2 && strings.TrimRight(string(line), "\r\n") == "" {
			if len(raw) == len(line) { // empty lines before a request are allowed
				raw = raw[:0]
				continue
			}
			break
		}
	}
	return parseHead(raw)
}

// parseHead reads what matters from a head, with net/http's own parser,
// and refuses what could make patina and the server see different
// requests.
func parseHead(raw []byte) (*head, error) {
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errHead, err)
	}
	h := &head{raw: raw, method: req.Method, proto: req.Proto, absolute: req.URL.IsAbs(),
		upgrade: strings.ToLower(req.Header.Get("Upgrade"))}
	var cl, te, hosts int
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		k, _, _ := strings.Cut(line, ":")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "content-length":
			cl++
		case "transfer-encoding":
			te++
		case "host":
			hosts++
		}
	}
	switch {
	case cl > 1 || te > 1 || (cl > 0 && te > 0):
		return nil, fmt.Errorf("%w: both or several Content-Length and Transfer-Encoding", errHead)
	case te == 1 && (len(req.TransferEncoding) != 1 || req.TransferEncoding[0] != "chunked"):
		return nil, fmt.Errorf("%w: a Transfer-Encoding other than chunked", errHead)
	case hosts > 1:
		return nil, fmt.Errorf("%w: several Host headers", errHead)
	}
	h.chunked = te == 1
	if cl == 1 {
		h.length = req.ContentLength
	}
	host := req.Host
	if hp, _, err := net.SplitHostPort(host); err == nil {
		host = hp
	}
	h.host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	return h, nil
}

// writeHead forwards a head: as it came, but without an upgrade to
// HTTP/2 (h2c), whose streams could each name another host.
func (h *head) write(w io.Writer) error {
	if !strings.Contains(h.upgrade, "h2c") {
		_, err := w.Write(h.raw)
		return err
	}
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(string(h.raw), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "upgrade", "http2-settings":
			continue
		case "connection":
			var keep []string
			for _, t := range strings.Split(v, ",") {
				t = strings.TrimSpace(t)
				if lt := strings.ToLower(t); lt != "upgrade" && lt != "http2-settings" && t != "" {
					keep = append(keep, t)
				}
			}
			if len(keep) == 0 {
				continue
			}
			line = k + ": " + strings.Join(keep, ", ") + "\r\n"
		}
		out.WriteString(line)
	}
	h.upgrade = ""
	_, err := w.Write(out.Bytes())
	return err
}

// copyBody forwards a request's body as it is framed.
func (h *head) copyBody(w io.Writer, br *bufio.Reader) error {
	switch {
	case h.chunked:
		return copyChunked(w, br)
	case h.length > 0:
		_, err := io.CopyN(w, br, h.length)
		return err
	}
	return nil
}

// copyChunked forwards a chunked body as it is (sizes, extensions,
// trailers), bounded per line.
func copyChunked(w io.Writer, br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("%w: chunked body: %v", errHead, err)
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
		sz, _, _ := strings.Cut(strings.TrimSpace(string(line)), ";")
		n, err := strconv.ParseUint(strings.TrimSpace(sz), 16, 62)
		if err != nil {
			return fmt.Errorf("%w: chunk size %q", errHead, sz)
		}
		if n == 0 {
			total := 0
			for { // trailers, up to the empty line
				line, err := br.ReadSlice('\n')
				if err != nil {
					return fmt.Errorf("%w: trailers: %v", errHead, err)
				}
				if total += len(line); total > maxHead {
					return fmt.Errorf("%w: trailers too long", errHead)
				}
				if _, err := w.Write(line); err != nil {
					return err
				}
				if strings.TrimRight(string(line), "\r\n") == "" {
					return nil
				}
			}
		}
		if _, err := io.CopyN(w, br, int64(n)+2); err != nil {
			return err
		}
	}
}

// handleHTTP matches a plain HTTP connection by each request's Host: the
// first one chooses the server (resolved by the proxy), every later one on
// the connection must name the same host.
func (s *Service) handleHTTP(ctx context.Context, m *member, f *flow, orig netip.AddrPort, first []byte) {
	p := s.policy(m)
	_, byAddr := p.MatchAddr(orig.Addr(), orig.Port())
	if p.Mode == ModeOpen || byAddr {
		s.pipeChecked(ctx, m, f, p, orig, first)
		return
	}
	c := f.client
	br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(first), c), maxHeadLine)
	deny := func(dest, rule string) {
		s.refused(m, dest, rule)
		_ = c.SetWriteDeadline(time.Now().Add(refusalWrite))
		write403(c, dest, rule)
		closeGently(c)
	}
	_ = c.SetReadDeadline(time.Now().Add(firstHeadBy))
	h, err := readHead(br)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		deny(orig.String()+" (HTTP)", "not in the allow list (no readable HTTP request: "+err.Error()+")")
		return
	}
	dest := fmt.Sprintf("%s:%d (HTTP, %s)", h.host, orig.Port(), orig.Addr())
	if r := refuseHead(h, ""); r != "" {
		deny(dest, r)
		return
	}
	name, err := normalName(h.host, false)
	if err != nil {
		deny(dest, "not in the allow list (the Host is not a DNS name)")
		return
	}
	if _, ok := p.MatchName(name, orig.Port()); !ok {
		deny(dest, "not in the allow list")
		return
	}
	up, ap, r := s.dialName(ctx, p, name, orig.Port())
	if r != nil {
		deny(dest, r.rule)
		return
	}
	s.mu.Lock()
	f.dst, f.name = ap, name
	r = s.check(m.policy, ap, name) // it may have changed meanwhile
	s.mu.Unlock()
	if r != nil || !f.setUp(up) {
		up.Close()
		reset(c)
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := io.Copy(c, up); err != nil {
			f.close()
			return
		}
		_ = c.CloseWrite()
	}()
	defer func() { <-done }()
	for {
		if err := h.write(up); err != nil {
			f.close()
			return
		}
		if err := h.copyBody(up, br); err != nil {
			f.close()
			return
		}
		if h.upgrade != "" {
			// A WebSocket (or other upgrade) to the same server: bytes from
			// here on are its protocol's.
			if _, err := io.Copy(up, br); err != nil {
				f.close()
				return
			}
			closeWrite(up)
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(idleHeadWait))
		next, err := readHead(br)
		_ = c.SetReadDeadline(time.Time{})
		if errors.Is(err, io.EOF) {
			closeWrite(up)
			return
		}
		if err != nil {
			f.close()
			return
		}
		if r := refuseHead(next, name); r != "" {
			s.refused(m, fmt.Sprintf("%s:%d (HTTP, %s)", next.host, orig.Port(), orig.Addr()), r)
			f.close()
			return
		}
		h = next
	}
}

// refuseHead says why a request is refused whatever the policy ("" if it
// is not); with first, a later request on a connection must name that
// host.
func refuseHead(h *head, first string) string {
	switch {
	case h.method == "CONNECT":
		return "CONNECT is refused: connections are intercepted as they are, no proxy setting is needed"
	case h.method == "PRI" || h.proto == "HTTP/2.0":
		return "HTTP/2 without TLS (prior knowledge) is refused: its requests cannot be checked"
	case h.absolute:
		return "a request for a proxy (absolute URL) is refused: connections are intercepted as they are, no proxy setting is needed"
	case first != "" && h.host != first:
		return "another host than the connection's first request (" + first + ")"
	}
	return ""
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
