package mux

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Protocol constants: both sides use the same, so nothing needs
// negotiating.
const (
	// HeaderLen is the size of every frame's header.
	HeaderLen = 12
	// MaxData is the largest DATA payload in one frame.
	MaxData = 64 << 10
	// MaxOpenHeader is the largest stream header (the OPEN payload).
	MaxOpenHeader = 64 << 10
	// InitialWindow is how many bytes a stream's sender may have in flight
	// beyond what the receiver has read when the stream opens. The receiver
	// grows the window (doubling, each time half of it was read) up to
	// Window while its Config.Budget allows: a stream nobody reads costs
	// InitialWindow, and what the windows grew to is bounded by the budget.
	InitialWindow = 4 << 10
	// Window is the largest window: the most a stream ever buffers.
	Window = 256 << 10
	// maxReason bounds RESET and GOAWAY reasons.
	maxReason = 1024
)

// Frame types.
const (
	typeOpen   = 1 // payload: the stream header
	typeData   = 2 // payload: bytes, counted against the window
	typeCredit = 3 // payload: uint32 window increment
	typeReset  = 4 // payload: reason; aborts the stream both ways
	typePing   = 5 // payload: 8 bytes, echoed by a PONG
	typePong   = 6
	typeGoAway = 7 // payload: reason; the sender is closing the connection
)

// readBuffer is the read loop's buffer. Frames are small (a header, a
// command's output) or up to MaxData; the rest of a large frame is read
// straight into its payload, past the buffer. An idle connection keeps
// it: one per workspace, so 64 KiB was 64 MB for 1,000 workspaces.
const readBuffer = 16 << 10

// flagFIN on OPEN or DATA: the sender will send no more data on the stream.
const flagFIN = 1

// Errors. Stream and connection errors wrap them.
var (
	// ErrClosed: the connection is closed (by this side, the peer, or a
	// failure; Conn.Err says which).
	ErrClosed = errors.New("mux: connection closed")
	// ErrReset: the stream was aborted (ResetError says by whom and why).
	ErrReset = errors.New("mux: stream reset")
	// ErrProtocol: the peer broke the protocol; the connection is closed.
	ErrProtocol = errors.New("mux: protocol violation")
	// ErrTooLarge: a header longer than MaxOpenHeader.
	ErrTooLarge = errors.New("mux: header too large")
	// ErrWriteClosed: a write after CloseWrite or WriteFinal.
	ErrWriteClosed = errors.New("mux: write after close")
)

// ResetError is the error of a stream that was reset.
type ResetError struct {
	Remote bool   // the peer reset it
	Reason string // as given by whoever reset it
}

func (e *ResetError) Error() string {
	who := "locally"
	if e.Remote {
		who = "by the peer"
	}
	return fmt.Sprintf("mux: stream reset %s: %s", who, e.Reason)
}

// Unwrap makes errors.Is(err, ErrReset) true.
func (e *ResetError) Unwrap() error { return ErrReset }

// Config bounds a connection. Zero values take the defaults noted.
type Config struct {
	// MaxStreams is how many streams the peer may have open at once
	// (default 256); negative: the peer may open none (each is reset).
	MaxStreams int
	// AcceptBacklog is how many streams opened by the peer may wait for
	// Accept (default MaxStreams); more are reset.
	AcceptBacklog int
	// KeepAlive is how often a ping is sent; a peer silent for twice as long
	// loses the connection (default 10 s).
	KeepAlive time.Duration
	// WriteTimeout bounds each frame write: a peer that stops reading for
	// that long loses the connection (default 10 s).
	WriteTimeout time.Duration
	// Budget, if set, is what the receive windows of this side's streams
	// grow from beyond InitialWindow (nil: each grows to Window freely).
	Budget Budget
	// Logger gets protocol violations (default: discard).
	Logger *slog.Logger
}

// Budget is memory shared by many connections (budget.Budget).
type Budget interface {
	TryAcquireSpare(n int64) bool
	Release(n int64)
}

func (c Config) withDefaults() Config {
	if c.MaxStreams == 0 {
		c.MaxStreams = 256
	}
	if c.AcceptBacklog <= 0 {
		c.AcceptBacklog = max(c.MaxStreams, 1)
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 10 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Conn is one multiplexed connection.
type Conn struct {
	nc     net.Conn
	cfg    Config
	server bool

	wmu  sync.Mutex // serialises frame writes
	wbuf []byte     // writeCoalesced's buffer (wmu held)

	mu       sync.Mutex
	streams  map[uint32]*Stream
	nextID   uint32
	lastPeer uint32 // highest stream id the peer opened
	peerOpen int    // streams the peer opened that are not finished
	closed   bool
	err      error

	accept chan *Stream
	ctrl   chan frame // control frames from the read loop and the pinger
	done   chan struct{}
	lastRx atomic.Int64 // unix nanos of the last frame received
	// fullWindows: streams start at Window (UseFullWindows).
	fullWindows atomic.Bool
}

type frame struct {
	typ     byte
	flags   byte
	id      uint32
	payload []byte
}

// Client runs the dialing side of a connection (odd stream ids).
func Client(nc net.Conn, cfg Config) *Conn { return newConn(nc, cfg, false) }

// Server runs the listening side of a connection (even stream ids).
func Server(nc net.Conn, cfg Config) *Conn { return newConn(nc, cfg, true) }

func newConn(nc net.Conn, cfg Config, server bool) *Conn {
	c := &Conn{
		nc:      nc,
		cfg:     cfg.withDefaults(),
		server:  server,
		streams: map[uint32]*Stream{},
		nextID:  1,
		done:    make(chan struct{}),
		ctrl:    make(chan frame, 64),
	}
	if server {
		c.nextID = 2
	}
	c.accept = make(chan *Stream, c.cfg.AcceptBacklog)
	c.lastRx.Store(time.Now().UnixNano())
	go c.readLoop()
	go c.ctrlLoop()
	go c.keepAlive()
	return c
}

// Done is closed when the connection is closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the connection closed (nil while open).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// closeWriteWait bounds Close's writes (a write in flight, then the
// goodbye): a peer that does not read must not hold a Close.
const closeWriteWait = 100 * time.Millisecond

// Close closes the connection, telling the peer; every stream fails with
// ErrClosed.
func (c *Conn) Close() error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if !closed {
		// A write blocked on a peer that does not read gives up at once.
		_ = c.nc.SetWriteDeadline(time.Now().Add(closeWriteWait))
		c.wmu.Lock()
		_ = c.nc.SetWriteDeadline(time.Now().Add(closeWriteWait))
		_ = writeFrameTo(c.nc, typeGoAway, 0, 0, []byte("closing"))
		c.wmu.Unlock()
	}
	c.fail(ErrClosed)
	return nil
}

// fail closes the connection with err (the first error wins).
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	if !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	c.err = err
	streams := make([]*Stream, 0, len(c.streams))
	for _, s := range c.streams {
		streams = append(streams, s)
	}
	c.mu.Unlock()
	close(c.done)
	_ = c.nc.Close()
	for _, s := range streams {
		s.releaseWindow()
		s.markDone()
		s.wake()
	}
}

// connErr is the error streams report once the connection is gone.
func (c *Conn) connErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return ErrClosed
}

// Open opens a stream carrying header (at most MaxOpenHeader bytes). With
// fin, the stream carries no data from this side (a request without a
// body): only the answer is read.
func (c *Conn) Open(ctx context.Context, header []byte, fin bool) (*Stream, error) {
	if len(header) > MaxOpenHeader {
		return nil, fmt.Errorf("%w: %d bytes (max %d)", ErrTooLarge, len(header), MaxOpenHeader)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The id is taken and the OPEN written under the write lock: the peer
	// sees ids in increasing order, as it requires.
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, c.connErr()
	}
	if c.nextID > 1<<31 {
		c.mu.Unlock()
		go c.fail(errors.New("stream ids exhausted"))
		return nil, ErrClosed
	}
	s := c.newStream(c.nextID, false)
	c.nextID += 2
	s.localFIN = fin
	c.streams[s.id] = s
	c.mu.Unlock()
	var flags byte
	if fin {
		flags = flagFIN
	}
	if err := c.writeFrameLocked(typeOpen, flags, s.id, header); err != nil {
		return nil, err
	}
	return s, nil
}

// Accept waits for a stream opened by the peer.
func (c *Conn) Accept(ctx context.Context) (*Stream, error) {
	select {
	case s := <-c.accept:
		return s, nil
	case <-c.done:
		return nil, c.connErr()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Conn) newStream(id uint32, remote bool) *Stream {
	w := InitialWindow
	if c.fullWindows.Load() {
		w = Window
	}
	return &Stream{
		c:          c,
		id:         id,
		remote:     remote,
		recvWindow: w,
		recvLimit:  w,
		sendWindow: w,
		readable:   make(chan struct{}, 1),
		writable:   make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
}

// writeFrame writes one frame, failing the connection if the write fails
// or takes longer than WriteTimeout.
func (c *Conn) writeFrame(typ, flags byte, id uint32, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeFrameLocked(typ, flags, id, payload)
}

// writeFrameLocked is writeFrame with c.wmu held.
func (c *Conn) writeFrameLocked(typ, flags byte, id uint32, payload []byte) error {
	select {
	case <-c.done:
		return c.connErr()
	default:
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
	var err error
	if _, ok := c.nc.(*PipeConn); ok && len(payload) <= pipeCoalesce {
		err = c.writeCoalesced(typ, flags, id, payload)
	} else {
		err = writeFrameTo(c.nc, typ, flags, id, payload)
	}
	if err != nil {
		c.fail(fmt.Errorf("write: %w", err))
		return fmt.Errorf("%w: write: %w", ErrClosed, err)
	}
	return nil
}

// pipeCoalesce is the largest payload written in one system call with its
// header on a PipeConn (which has no writev: two writes would also wake the
// reader twice, once for the header alone).
const pipeCoalesce = 4 << 10

// writeCoalesced writes a frame's header and payload with one write, in a
// buffer kept for it (c.wmu held).
func (c *Conn) writeCoalesced(typ, flags byte, id uint32, payload []byte) error {
	if c.wbuf == nil {
		c.wbuf = make([]byte, HeaderLen+pipeCoalesce)
	}
	b := c.wbuf[:HeaderLen+len(payload)]
	clear(b[:HeaderLen])
	b[0], b[1] = typ, flags
	binary.BigEndian.PutUint32(b[4:8], id)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(payload)))
	copy(b[HeaderLen:], payload)
	_, err := c.nc.Write(b)
	return err
}

func writeFrameTo(w io.Writer, typ, flags byte, id uint32, payload []byte) error {
	var hdr [HeaderLen]byte
	hdr[0], hdr[1] = typ, flags
	binary.BigEndian.PutUint32(hdr[4:8], id)
	binary.BigEndian.PutUint32(hdr[8:12], uint32(len(payload)))
	if len(payload) == 0 {
		_, err := w.Write(hdr[:])
		return err
	}
	bufs := net.Buffers{hdr[:], payload}
	_, err := bufs.WriteTo(w)
	return err
}

// queue hands a control frame to the control writer without blocking the
// read loop; a peer that makes the queue overflow (a ping flood) loses the
// connection.
func (c *Conn) queue(f frame) {
	select {
	case c.ctrl <- f:
	case <-c.done:
	default:
		c.violation("control queue overflow (ping or reset flood)")
	}
}

func (c *Conn) ctrlLoop() {
	for {
		select {
		case f := <-c.ctrl:
			if c.writeFrame(f.typ, f.flags, f.id, f.payload) != nil {
				return
			}
		case <-c.done:
			return
		}
	}
}

func (c *Conn) keepAlive() {
	t := time.NewTicker(c.cfg.KeepAlive)
	defer t.Stop()
	var seq uint64
	for {
		select {
		case <-t.C:
			if time.Since(time.Unix(0, c.lastRx.Load())) > 2*c.cfg.KeepAlive {
				c.fail(fmt.Errorf("the peer sent nothing for %s", 2*c.cfg.KeepAlive))
				return
			}
			seq++
			var p [8]byte
			binary.BigEndian.PutUint64(p[:], seq)
			select {
			case c.ctrl <- frame{typ: typePing, payload: p[:]}:
			default:
			}
		case <-c.done:
			return
		}
	}
}

// violation closes the connection because the peer broke the protocol.
func (c *Conn) violation(format string, args ...any) {
	err := fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
	c.cfg.Logger.Warn("mux: closing the connection", "err", err)
	c.fail(err)
}

func (c *Conn) readLoop() {
	br := bufio.NewReaderSize(c.nc, readBuffer)
	var hdr [HeaderLen]byte
	var small [maxReason]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the peer closed the connection")
			}
			c.fail(err)
			return
		}
		c.lastRx.Store(time.Now().UnixNano())
		typ, flags := hdr[0], hdr[1]
		id := binary.BigEndian.Uint32(hdr[4:8])
		n := binary.BigEndian.Uint32(hdr[8:12])
		if hdr[2] != 0 || hdr[3] != 0 {
			c.violation("reserved header bytes set")
			return
		}
		var max uint32
		switch typ {
		case typeOpen:
			max = MaxOpenHeader
		case typeData:
			max = MaxData
		case typeCredit:
			max = 4
		case typeReset, typeGoAway:
			max = maxReason
		case typePing, typePong:
			max = 8
		default:
			c.violation("unknown frame type %d", typ)
			return
		}
		if n > max {
			c.violation("frame type %d of %d bytes (max %d)", typ, n, max)
			return
		}
		var payload []byte
		if typ == typeOpen || typ == typeData {
			payload = make([]byte, n) // kept by the stream
		} else {
			payload = small[:n]
		}
		if _, err := io.ReadFull(br, payload); err != nil {
			c.fail(fmt.Errorf("read: %w", err))
			return
		}
		if !c.dispatch(typ, flags, id, payload) {
			return
		}
	}
}

// dispatch handles one frame; false once the connection is closed.
func (c *Conn) dispatch(typ, flags byte, id uint32, payload []byte) bool {
	fin := flags&flagFIN != 0
	if flags&^flagFIN != 0 || (fin && typ != typeOpen && typ != typeData) {
		c.violation("unknown flags %#x on frame type %d", flags, typ)
		return false
	}
	switch typ {
	case typeOpen:
		return c.onOpen(id, fin, payload)
	case typeData:
		return c.onData(id, fin, payload)
	case typeCredit:
		if len(payload) != 4 || binary.BigEndian.Uint32(payload) == 0 {
			c.violation("bad credit frame")
			return false
		}
		if s := c.stream(id); s != nil && !s.addCredit(binary.BigEndian.Uint32(payload)) {
			c.violation("credit beyond 2^31 on stream %d", id)
			return false
		}
	case typeReset:
		if s := c.stream(id); s != nil {
			s.setReset(&ResetError{Remote: true, Reason: string(payload)})
		}
	case typePing:
		if len(payload) != 8 {
			c.violation("bad ping")
			return false
		}
		c.queue(frame{typ: typePong, payload: append([]byte(nil), payload...)})
	case typePong:
	case typeGoAway:
		c.fail(fmt.Errorf("the peer closed the connection: %q", payload))
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

func (c *Conn) stream(id uint32) *Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}

func (c *Conn) onOpen(id uint32, fin bool, header []byte) bool {
	peerParity := uint32(1)
	if !c.server {
		peerParity = 0
	}
	c.mu.Lock()
	if id == 0 || id%2 != peerParity || id <= c.lastPeer {
		c.mu.Unlock()
		c.violation("bad stream id %d opened by the peer", id)
		return false
	}
	c.lastPeer = id
	if c.cfg.MaxStreams < 0 || c.peerOpen >= c.cfg.MaxStreams {
		c.mu.Unlock()
		c.queue(frame{typ: typeReset, id: id, payload: []byte("too many streams")})
		return true
	}
	s := c.newStream(id, true)
	s.header = header
	s.remoteFIN = fin
	c.streams[id] = s
	c.peerOpen++
	c.mu.Unlock()
	select {
	case c.accept <- s:
	default:
		s.Reset("accept backlog full")
	}
	return true
}

func (c *Conn) onData(id uint32, fin bool, p []byte) bool {
	s := c.stream(id)
	if s == nil {
		return true // a stream closed or reset here; data in flight
	}
	s.mu.Lock()
	switch {
	case s.remoteFIN:
		s.mu.Unlock()
		c.violation("data after FIN on stream %d", id)
		return false
	case len(p) > s.recvWindow:
		s.mu.Unlock()
		c.violation("stream %d: %d bytes beyond a window of %d", id, len(p), s.recvWindow)
		return false
	}
	s.recvWindow -= len(p)
	if s.resetErr == nil && !s.readClosed && len(p) > 0 {
		s.rbuf = append(s.rbuf, p)
		s.rlen += len(p)
	} else {
		s.consumed += len(p) // discarded: give the window back
	}
	if fin {
		s.remoteFIN = true
	}
	s.mu.Unlock()
	s.wake()
	if fin {
		s.maybeForget()
	}
	return true
}

// forget removes a finished stream from the connection's table.
func (c *Conn) forget(s *Stream) {
	c.mu.Lock()
	found := c.streams[s.id] == s
	if found {
		delete(c.streams, s.id)
		if s.remote {
			c.peerOpen--
		}
	}
	c.mu.Unlock()
	if found {
		s.releaseWindow()
	}
}

// NetConn is the connection the streams travel on.
func (c *Conn) NetConn() net.Conn { return c.nc }

// UseFullWindows makes the streams opened from now on, by either side,
// start at Window both ways (and so never grow): what a peer older than
// growing windows expects (a patina agent of protocol 1, whose streams all
// had Window). Streams already open keep theirs.
func (c *Conn) UseFullWindows() { c.fullWindows.Store(true) }

// closedNow reports whether the connection is closed.
func (c *Conn) closedNow() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}
