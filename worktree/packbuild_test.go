package worktree

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"testing"
)

// Crafting packs by hand, as a hostile workspace would: git's pack format
// (Documentation/gitformat-pack.txt) with any sizes and bytes.

// testObj is one object of a crafted pack.
type testObj struct {
	typ  int    // objCommit ... objRefDelta, or anything
	data []byte // inflated content; for a delta, the delta
	base int    // objOfsDelta: index of the base object in the pack
	ref  []byte // objRefDelta: the base's id (hashLen bytes)
	// size, if not -1, is the size the header declares instead of
	// len(data).
	size int64
	// z, if set, is the object's zlib stream instead of data compressed.
	z []byte
}

// blobObj is a blob of content.
func blobObj(content []byte) testObj { return testObj{typ: objBlob, data: content, size: -1} }

// ofsDelta is a delta against the pack's object base.
func ofsDelta(base int, delta []byte) testObj {
	return testObj{typ: objOfsDelta, data: delta, base: base, size: -1}
}

// refDelta is a delta against the object with id ref.
func refDelta(ref []byte, delta []byte) testObj {
	return testObj{typ: objRefDelta, data: delta, ref: ref, size: -1}
}

// buildPack writes a version 2 pack of objs with a correct trailer
// (sha1 for hashLen 20, sha256 for 32).
func buildPack(t testing.TB, hashLen int, objs ...testObj) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("PACK")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(len(objs)))
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		size := uint64(len(o.data))
		if o.size >= 0 {
			size = uint64(o.size)
		}
		b.Write(objHeader(o.typ, size))
		switch o.typ {
		case objOfsDelta:
			b.Write(ofsEncode(uint64(offsets[i] - offsets[o.base])))
		case objRefDelta:
			b.Write(o.ref)
		}
		if o.z != nil {
			b.Write(o.z)
		} else {
			b.Write(zlibOf(o.data))
		}
	}
	b.Write(packSum(hashLen, b.Bytes()))
	return b.Bytes()
}

func packSum(hashLen int, b []byte) []byte {
	if hashLen == 32 {
		s := sha256.Sum256(b)
		return s[:]
	}
	s := sha1.Sum(b)
	return s[:]
}

// objHeader is a pack object's type and size header.
func objHeader(typ int, size uint64) []byte {
	c := byte(typ&7)<<4 | byte(size&15)
	size >>= 4
	var out []byte
	for size > 0 {
		out = append(out, c|0x80)
		c = byte(size & 0x7f)
		size >>= 7
	}
	return append(out, c)
}

// ofsEncode is git's OFS_DELTA offset encoding.
func ofsEncode(ofs uint64) []byte {
	buf := []byte{byte(ofs & 0x7f)}
	for ofs >>= 7; ofs > 0; ofs >>= 7 {
		ofs--
		buf = append([]byte{byte(0x80 | ofs&0x7f)}, buf...)
	}
	return buf
}

func zlibOf(data []byte) []byte {
	var b bytes.Buffer
	w, _ := zlib.NewWriterLevel(&b, zlib.BestCompression)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// varint is a delta header size.
func varint(n uint64) []byte {
	var out []byte
	for n >= 0x80 {
		out = append(out, byte(n)|0x80)
		n >>= 7
	}
	return append(out, byte(n))
}

// copyOp is a delta instruction copying size bytes of the base from off
// (size < 1<<24).
func copyOp(off, size uint64) []byte {
	cmd := byte(0x80)
	var args []byte
	for i := range 4 {
		if v := byte(off >> (8 * i)); v != 0 {
			cmd |= 1 << i
			args = append(args, v)
		}
	}
	for i := range 3 {
		if v := byte(size >> (8 * i)); v != 0 {
			cmd |= 0x10 << i
			args = append(args, v)
		}
	}
	return append([]byte{cmd}, args...)
}

// copyDelta is a delta from a base of baseSize bytes to a result that
// repeats the base, whole, times times (the delta bomb's shape).
func copyDelta(baseSize uint64, times int) []byte {
	d := append(varint(baseSize), varint(baseSize*uint64(times))...)
	const chunk = 1 << 23
	for range times {
		for off := uint64(0); off < baseSize; off += chunk {
			d = append(d, copyOp(off, min(chunk, baseSize-off))...)
		}
	}
	return d
}

// insertDelta is a delta from a base of baseSize bytes to content, all
// inserted.
func insertDelta(baseSize uint64, content []byte) []byte {
	d := append(varint(baseSize), varint(uint64(len(content)))...)
	for len(content) > 0 {
		n := min(len(content), 127)
		d = append(d, byte(n))
		d = append(d, content[:n]...)
		content = content[n:]
	}
	return d
}

// objectID is the id git gives an object of type typ ("blob"...) and
// content, in hex.
func objectID(hashLen int, typ string, content []byte) string {
	hdr := fmt.Sprintf("%s %d\x00", typ, len(content))
	if hashLen == 32 {
		s := sha256.Sum256(append([]byte(hdr), content...))
		return hex.EncodeToString(s[:])
	}
	s := sha1.Sum(append([]byte(hdr), content...))
	return hex.EncodeToString(s[:])
}

// bombBlob is the delta bomb's base: 16 MiB of zeros (16 KB deflated).
const bombBlob = 16 << 20

// deltaBomb is the pack seen at main: one 16 MiB blob and deltas copies
// deltas each copying it 256 times (4 GiB each), about 16 KB in all.
func deltaBomb(t testing.TB, hashLen, deltas int) []byte {
	t.Helper()
	objs := []testObj{blobObj(make([]byte, bombBlob))}
	d := copyDelta(bombBlob, 256)
	for range deltas {
		objs = append(objs, ofsDelta(0, d))
	}
	return buildPack(t, hashLen, objs...)
}
