package worktree

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
)

// A workspace's pack is read by a scanner on its way to git index-pack.
// index-pack trusts the sizes a pack declares: it inflates every object and
// applies every delta in memory, so a 16 KB pack of one 16 MiB blob and a
// delta copying it 256 times made it allocate 4 GiB before anything could
// look at the result. The scanner parses the pack as it flows (the header,
// each object's type and size, delta bases, and each zlib stream, inflated
// into a small scratch buffer and discarded) and refuses it as soon as a
// declared size is over a limit, before index-pack has seen the object.
//
// It hands bytes on only once it has parsed them, so the object that broke
// a limit never reaches git, and neither does the pack's trailing checksum:
// index-pack resolves deltas only after it has read the whole pack, so a
// refused pack never gets that far. Its memory is one read buffer and one
// zlib reader, whatever the pack.

// packLimits are what scanPack enforces. Zero values are not "no limit":
// every field must be set.
type packLimits struct {
	packBytes   int64 // the stream itself, trailer included
	objectBytes int64 // any one object, inflated: its declared size, or a delta's result size
	totalBytes  int64 // the sum of the objects' inflated sizes (a delta counts its result) and of the deltas' data
	hashLen     int   // 20 (sha1) or 32 (sha256): REF_DELTA bases and the trailer
}

// packStats describes a pack scanPack accepted.
type packStats struct {
	Objects   uint32 // as the header declares (and the pack holds)
	Deltas    uint32 // OFS_DELTA and REF_DELTA entries
	Inflated  int64  // sum of the objects' inflated sizes, deltas counted by their result
	DeltaData int64  // sum of the deltas' own inflated sizes
	Bytes     int64  // length of the stream
}

// Pack object types (git's enum object_type).
const (
	objCommit   = 1
	objTree     = 2
	objBlob     = 3
	objTag      = 4
	objOfsDelta = 6
	objRefDelta = 7
)

// packHeaderLen is "PACK", a version and an object count.
const packHeaderLen = 12

// minPackedObject is the fewest bytes one object takes in a pack: a
// one-byte header and the shortest zlib stream (2 bytes of header, an
// empty final block of 1 byte, a 4-byte checksum). A header declaring more
// objects than the pack limit can hold is refused before index-pack sees
// it (index-pack allocates its table of objects from that count).
const minPackedObject = 1 + 7

// scanBufSize is the scanner's read buffer: what it holds back from git
// at most, and its memory besides the zlib reader.
const scanBufSize = 64 << 10

// scanPack copies the pack stream src to dst, checking it against lim, and
// returns what it found. On any error it stops: what it wrote to dst was
// parsed and within the limits, the object (or header, or trailer) it
// refused was not written, nor anything after it. Errors wrap ErrTooLarge
// (a size over a limit) or ErrRejected (a malformed pack), or are dst's or
// src's own errors.
func scanPack(dst io.Writer, src io.Reader, lim packLimits) (packStats, error) {
	s := &packScanner{
		in:  &gateReader{src: src, dst: dst, buf: make([]byte, scanBufSize), max: lim.packBytes},
		lim: lim,
	}
	if lim.hashLen == 32 {
		s.in.sum = sha256.New()
	} else {
		s.in.sum = sha1.New()
	}
	err := s.scan()
	s.stats.Bytes = s.in.off()
	return s.stats, err
}

type packScanner struct {
	in      *gateReader
	lim     packLimits
	stats   packStats
	zr      io.ReadCloser // reused zlib reader
	scratch [32 << 10]byte
}

// malformed is a broken pack.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: the workspace's pack is malformed: %s", ErrRejected, fmt.Sprintf(format, args...))
}

func (s *packScanner) scan() error {
	var h [packHeaderLen]byte
	if err := s.in.readFull(h[:]); err != nil {
		return s.short(err, "its header")
	}
	n, err := parsePackHeader(h[:])
	if err != nil {
		return malformed("%v", err)
	}
	room := (s.lim.packBytes - packHeaderLen - int64(s.lim.hashLen)) / minPackedObject
	if int64(n) > room {
		return fmt.Errorf("%w: the workspace's pack declares %d objects, more than fit in patina's limit of %s for a pack", ErrTooLarge, n, formatBytes(s.lim.packBytes))
	}
	s.stats.Objects = n
	for i := range n {
		if err := s.object(i); err != nil {
			return err
		}
	}
	return s.trailer()
}

// short explains a read that ended early.
func (s *packScanner) short(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return malformed("it ends in %s (after %d bytes)", what, s.in.off())
	}
	return err
}

// object checks the i-th object (counting from 0) and consumes it.
func (s *packScanner) object(i uint32) error {
	start := s.in.off()
	c, err := s.in.ReadByte()
	if err != nil {
		return s.short(err, fmt.Sprintf("object %d's header", i+1))
	}
	typ := int(c>>4) & 7
	size := uint64(c & 15)
	// As git's unpack_object_header_buffer: a size that does not fit
	// its unsigned long is refused.
	for shift := uint(4); c&0x80 != 0; shift += 7 {
		if shift > 64-7 {
			return malformed("object %d's size does not fit 64 bits", i+1)
		}
		if c, err = s.in.ReadByte(); err != nil {
			return s.short(err, fmt.Sprintf("object %d's header", i+1))
		}
		size += uint64(c&0x7f) << shift
	}
	if size > uint64(s.lim.objectBytes) {
		return fmt.Errorf("%w: object %d of the workspace's pack is %s inflated, over patina's limit of %s for one object", ErrTooLarge, i+1, formatBytes(size), formatBytes(s.lim.objectBytes))
	}
	delta := false
	switch typ {
	case objCommit, objTree, objBlob, objTag:
		if err := s.count(size); err != nil {
			return err
		}
	case objOfsDelta:
		delta = true
		// As git's get_delta_base: each continuation adds one, so every
		// offset has one encoding.
		if c, err = s.in.ReadByte(); err != nil {
			return s.short(err, fmt.Sprintf("object %d's delta base", i+1))
		}
		ofs := uint64(c & 0x7f)
		for c&0x80 != 0 {
			ofs++
			if ofs>>(64-7) != 0 {
				return malformed("object %d's delta base offset does not fit 64 bits", i+1)
			}
			if c, err = s.in.ReadByte(); err != nil {
				return s.short(err, fmt.Sprintf("object %d's delta base", i+1))
			}
			ofs = ofs<<7 | uint64(c&0x7f)
		}
		if ofs == 0 || ofs > uint64(start-packHeaderLen) {
			return malformed("object %d's delta base is outside the pack", i+1)
		}
	case objRefDelta:
		delta = true
		if err := s.in.skip(s.lim.hashLen); err != nil {
			return s.short(err, fmt.Sprintf("object %d's delta base", i+1))
		}
	default:
		return malformed("object %d has unknown type %d", i+1, typ)
	}
	if delta {
		s.stats.Deltas++
		s.stats.DeltaData += int64(size)
		if err := s.checkTotal(); err != nil {
			return err
		}
	}
	return s.inflate(i, size, delta)
}

// count adds an object of n inflated bytes to the total.
func (s *packScanner) count(n uint64) error {
	s.stats.Inflated += int64(n) // n ≤ objectBytes: no overflow before the check
	return s.checkTotal()
}

// checkTotal refuses a pack whose objects and delta data inflate to more
// than the total limit: the objects are what git will hold and write, the
// delta data what it (and the scanner) must inflate to get them.
func (s *packScanner) checkTotal() error {
	if s.stats.Inflated+s.stats.DeltaData > s.lim.totalBytes {
		return fmt.Errorf("%w: the workspace's objects inflate to more than patina's limit of %s in all", ErrTooLarge, formatBytes(s.lim.totalBytes))
	}
	return nil
}

// inflate reads object i's zlib stream, which must inflate to exactly size
// bytes; for a delta, the base and result sizes at its start are checked
// first, as soon as they have been inflated.
func (s *packScanner) inflate(i uint32, size uint64, delta bool) error {
	if s.zr == nil {
		zr, err := zlib.NewReader(s.in)
		if err != nil {
			return s.zerr(i, err)
		}
		s.zr = zr
	} else if err := s.zr.(zlib.Resetter).Reset(s.in, nil); err != nil {
		return s.zerr(i, err)
	}
	var got uint64
	var hdr []byte // a delta's first bytes, until its two sizes are read
	sizesRead := !delta
	for {
		n, err := s.zr.Read(s.scratch[:])
		got += uint64(n)
		if got > size {
			return malformed("object %d inflates to more than the %d bytes its header declares", i+1, size)
		}
		if !sizesRead && n > 0 {
			hdr = append(hdr, s.scratch[:min(n, 2*maxVarintLen)]...)
			done, derr := s.deltaSizes(i, hdr)
			if derr != nil {
				return derr
			}
			sizesRead = done
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return s.zerr(i, err)
		}
	}
	if got != size {
		return malformed("object %d inflates to %d bytes, not the %d its header declares", i+1, got, size)
	}
	if !sizesRead {
		return malformed("object %d is a delta too short for its sizes", i+1)
	}
	return nil
}

// zerr explains a zlib stream that failed: the stream itself, or the
// reading under it.
func (s *packScanner) zerr(i uint32, err error) error {
	if s.in.err != nil {
		return s.in.err
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return malformed("it ends in object %d's data (after %d bytes)", i+1, s.in.off())
	}
	return malformed("object %d's data: %v", i+1, err)
}

// maxVarintLen is the longest size varint accepted in a delta: git reads
// one into a size_t, and a longer one would shift bits out of it.
const maxVarintLen = 10

// deltaSizes parses a delta's base and result sizes from its first
// inflated bytes b. It reports false when b does not hold them yet, and
// refuses a result over the per-object limit or the total.
func (s *packScanner) deltaSizes(i uint32, b []byte) (bool, error) {
	_, n := deltaVarint(b)
	if n == 0 {
		return s.varintShort(i, b)
	}
	if n < 0 {
		return false, malformed("object %d's delta base size does not fit 64 bits", i+1)
	}
	result, m := deltaVarint(b[n:])
	if m == 0 {
		return s.varintShort(i, b)
	}
	if m < 0 {
		return false, malformed("object %d's delta result size does not fit 64 bits", i+1)
	}
	if result > uint64(s.lim.objectBytes) {
		return false, fmt.Errorf("%w: object %d of the workspace's pack is a delta making an object of %s, over patina's limit of %s for one object", ErrTooLarge, i+1, formatBytes(result), formatBytes(s.lim.objectBytes))
	}
	return true, s.count(result)
}

// varintShort: b may not hold a delta's sizes yet; it is refused once it
// is as long as two sizes can be.
func (s *packScanner) varintShort(i uint32, b []byte) (bool, error) {
	if len(b) >= 2*maxVarintLen {
		return false, malformed("object %d is a delta too short for its sizes", i+1)
	}
	return false, nil
}

// deltaVarint decodes a delta header's size (7 bits a byte, least
// significant first, high bit set on all but the last byte). n is the
// bytes used, 0 if b ends first, -1 if it runs over maxVarintLen bytes.
func deltaVarint(b []byte) (v uint64, n int) {
	for i, c := range b {
		if i == maxVarintLen {
			return 0, -1
		}
		v |= uint64(c&0x7f) << (7 * uint(i))
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	if len(b) >= maxVarintLen {
		return 0, -1
	}
	return 0, 0
}

// trailer checks the pack's checksum and that nothing follows it, then
// hands the rest on.
func (s *packScanner) trailer() error {
	want, err := s.in.checksum()
	if err != nil {
		return err
	}
	got := make([]byte, s.lim.hashLen)
	if err := s.in.readFull(got); err != nil {
		return s.short(err, "its checksum")
	}
	if !bytes.Equal(got, want) {
		return malformed("its checksum does not match its content")
	}
	end, err := s.in.atEOF()
	if err != nil {
		return err
	}
	if !end {
		return malformed("bytes follow its checksum")
	}
	return s.in.flush()
}

// gateReader reads src through a buffer and writes to dst only the bytes
// that have been consumed from it (by ReadByte and Read), when the buffer
// is refilled or flush is called. It implements io.ByteReader, so a zlib
// reader on it consumes exactly its stream and no more.
type gateReader struct {
	src    io.Reader
	dst    io.Writer
	sum    hash.Hash // of everything written to dst
	buf    []byte
	r, w   int   // buf[:r] consumed, buf[r:w] not yet
	done   int64 // bytes before buf[0]: written to dst
	max    int64 // bytes that may be consumed in all
	srcErr error // src's error (io.EOF included), once it has one
	dstErr error
	err    error // the first error other than io.EOF returned to a reader
}

// off is the number of bytes consumed.
func (g *gateReader) off() int64 { return g.done + int64(g.r) }

// fill makes buf[r:w] non-empty: it writes the consumed bytes to dst and
// reads more from src.
func (g *gateReader) fill() error {
	err := g.fill1()
	if err != nil && err != io.EOF && g.err == nil {
		g.err = err
	}
	return err
}

func (g *gateReader) fill1() error {
	if g.r < g.w {
		return nil
	}
	if err := g.flush(); err != nil {
		return err
	}
	if g.srcErr != nil {
		return g.srcErr
	}
	if g.off() >= g.max {
		// Reading one byte past the limit tells a pack that ends there
		// from one that goes on.
		var one [1]byte
		n, err := io.ReadFull(g.src, one[:])
		if n == 1 {
			return fmt.Errorf("%w: the workspace's pack is larger than patina's limit of %s", ErrTooLarge, formatBytes(g.max))
		}
		g.srcErr = err
		return err
	}
	room := int(min(int64(len(g.buf)), g.max-g.off()))
	for g.w == 0 && g.srcErr == nil {
		g.w, g.srcErr = g.src.Read(g.buf[:room])
	}
	if g.w > 0 {
		return nil
	}
	return g.srcErr
}

// flush writes the consumed bytes to dst.
func (g *gateReader) flush() error {
	if g.dstErr != nil {
		return g.dstErr
	}
	if g.r == 0 {
		return nil
	}
	if g.sum != nil {
		g.sum.Write(g.buf[:g.r])
	}
	if _, err := g.dst.Write(g.buf[:g.r]); err != nil {
		g.dstErr = err
		return err
	}
	g.done += int64(g.r)
	copy(g.buf, g.buf[g.r:g.w])
	g.w -= g.r
	g.r = 0
	return nil
}

// atEOF reports whether src has nothing after what was consumed, without
// handing anything on.
func (g *gateReader) atEOF() (bool, error) {
	if g.r < g.w {
		return false, nil
	}
	var one [1]byte
	for g.srcErr == nil {
		var n int
		if n, g.srcErr = g.src.Read(one[:]); n > 0 {
			return false, nil
		}
	}
	if g.srcErr == io.EOF {
		return true, nil
	}
	return false, g.srcErr
}

// checksum flushes what was consumed and returns the hash of it all; from
// then on nothing more is hashed.
func (g *gateReader) checksum() ([]byte, error) {
	if err := g.flush(); err != nil {
		return nil, err
	}
	sum := g.sum.Sum(nil)
	g.sum = nil
	return sum, nil
}

func (g *gateReader) ReadByte() (byte, error) {
	if g.r == g.w {
		if err := g.fill(); err != nil {
			return 0, err
		}
	}
	c := g.buf[g.r]
	g.r++
	return c, nil
}

func (g *gateReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if g.r == g.w {
		if err := g.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, g.buf[g.r:g.w])
	g.r += n
	return n, nil
}

func (g *gateReader) readFull(p []byte) error {
	_, err := io.ReadFull(g, p)
	return err
}

func (g *gateReader) skip(n int) error {
	for n > 0 {
		if g.r == g.w {
			if err := g.fill(); err != nil {
				if errors.Is(err, io.EOF) {
					return io.ErrUnexpectedEOF
				}
				return err
			}
		}
		k := min(n, g.w-g.r)
		g.r += k
		n -= k
	}
	return nil
}

// formatBytes says n in the largest binary unit that keeps it readable:
// "4 GiB", "1.5 MiB", "900 bytes".
func formatBytes[T int64 | uint64](v T) string {
	n := uint64(v)
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	if n < 1<<10 {
		return fmt.Sprintf("%d bytes", n)
	}
	u, d := 0, uint64(1<<10)
	for u+1 < len(units) && n >= d<<10 {
		u++
		d <<= 10
	}
	if n%d == 0 {
		return fmt.Sprintf("%d %s", n/d, units[u])
	}
	return fmt.Sprintf("%.1f %s", float64(n)/float64(d), units[u])
}
