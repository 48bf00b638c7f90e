package worktree

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// scanLimits are generous limits for the scanner's tests: a 64 MiB pack,
// 64 MiB per object, 256 MiB in all.
func scanLimits(hashLen int) packLimits {
	return packLimits{packBytes: 64 << 20, objectBytes: 64 << 20, totalBytes: 256 << 20, hashLen: hashLen}
}

// scanBytes runs scanPack on pack and returns what it handed on.
func scanBytes(pack []byte, lim packLimits) ([]byte, packStats, error) {
	var out bytes.Buffer
	st, err := scanPack(&out, bytes.NewReader(pack), lim)
	return out.Bytes(), st, err
}

// A pack git itself makes, with OFS and REF deltas (thin, against objects
// the receiver has), passes whole, and the sizes add up to what git says
// the objects inflate to.
func TestScanPackPassesGitPacks(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			dir := tempDir(t)
			gitT(t, dir, "init", "-q", "--object-format="+format)
			var text strings.Builder
			for i := range 2000 {
				text.WriteString("line " + strconv.Itoa(i) + " of a file that changes a little in every commit\n")
			}
			big := text.String()
			for i := range 6 {
				writeFile(t, filepath.Join(dir, "f.txt"), big+strings.Repeat("more\n", i))
				writeFile(t, filepath.Join(dir, "g.txt"), strings.Repeat("g", 100*i))
				gitT(t, dir, "add", "-A")
				gitT(t, dir, "commit", "-q", "-m", "c"+strconv.Itoa(i))
			}
			hashLen := 20
			if format == "sha256" {
				hashLen = 32
			}
			first := gitT(t, dir, "rev-list", "--max-parents=0", "HEAD")
			for _, tc := range []struct {
				name  string
				input string
				args  []string
			}{
				{"full", "HEAD\n", []string{"--delta-base-offset"}},
				{"ref-deltas", "HEAD\n", nil},
				{"thin", "HEAD\n^" + first + "\n", []string{"--thin", "--delta-base-offset"}},
				{"thin-ref", "HEAD\n^" + first + "\n", []string{"--thin"}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					pack, err := gitRawIn(dir, nil, tc.input, append([]string{"pack-objects", "--stdout", "--revs", "-q", "--window=50"}, tc.args...)...)
					if err != nil {
						t.Fatal(err)
					}
					got, st, err := scanBytes(pack, scanLimits(hashLen))
					if err != nil {
						t.Fatalf("exp the pack accepted, got %v", err)
					}
					if !bytes.Equal(got, pack) {
						t.Fatalf("exp the pack handed on unchanged (%d bytes), got %d bytes", len(pack), len(got))
					}
					if st.Deltas == 0 {
						t.Fatal("exp deltas in the pack")
					}
					if exp := objectSizes(t, dir, tc.input); exp != st.Inflated {
						t.Fatalf("exp inflated %d (git's sizes), got %d", exp, st.Inflated)
					}
					if exp, got := int64(len(pack)), st.Bytes; exp != got {
						t.Fatalf("exp %d bytes, got %d", exp, got)
					}
				})
			}
		})
	}
}

// objectSizes is the sum of the inflated sizes of the objects pack-objects
// --revs packs for input in the repository at dir: those rev-list
// --objects lists for it (a thin pack's bases are not among them).
func objectSizes(t *testing.T, dir, input string) int64 {
	t.Helper()
	objs, err := gitTryIn(dir, input, "rev-list", "--objects", "--stdin")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range strings.Split(objs, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			ids = append(ids, f[0])
		}
	}
	sizes, err := gitTryIn(dir, strings.Join(ids, "\n")+"\n", "cat-file", "--batch-check=%(objectsize)")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, s := range strings.Fields(sizes) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("cat-file: %q", s)
		}
		total += n
	}
	return total
}

// The delta bomb seen at main is refused at its delta, before the delta
// reaches git; with six of them, at the first.
func TestScanPackRefusesDeltaBombs(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 6} {
		pack := deltaBomb(t, 20, n)
		lim := packLimits{packBytes: 2 << 30, objectBytes: 512 << 20, totalBytes: 8 << 30, hashLen: 20}
		got, _, err := scanBytes(pack, lim)
		wantErr(t, err, ErrTooLarge)
		if !strings.Contains(err.Error(), "over patina's limit of 512 MiB for one object") || !strings.Contains(err.Error(), "4 GiB") {
			t.Fatalf("exp the error to name the 4 GiB object and the limit, got %q", err)
		}
		// Nothing of the delta was handed on: its offset is after the
		// blob, which is all a reader could have.
		blobEnd := len(buildPack(t, 20, blobObj(make([]byte, bombBlob)))) - 20
		if len(got) > blobEnd {
			t.Fatalf("exp at most the %d bytes before the delta handed on, got %d", blobEnd, len(got))
		}
	}
}

// Deltas each under the per-object limit, but more than the total in all.
func TestScanPackRefusesTotal(t *testing.T) {
	t.Parallel()
	base := make([]byte, 1<<20)
	d := copyDelta(1<<20, 64) // 64 MiB each
	objs := []testObj{blobObj(base)}
	for range 6 {
		objs = append(objs, ofsDelta(0, d))
	}
	pack := buildPack(t, 20, objs...)
	lim := packLimits{packBytes: 1 << 30, objectBytes: 64 << 20, totalBytes: 200 << 20, hashLen: 20}
	_, _, err := scanBytes(pack, lim)
	wantErr(t, err, ErrTooLarge)
	if !strings.Contains(err.Error(), "more than patina's limit of 200 MiB in all") {
		t.Fatalf("exp the total limit named, got %q", err)
	}
	lim.totalBytes = 1 << 30
	if _, st, err := scanBytes(pack, lim); err != nil || st.Inflated != 1<<20+6*64<<20 {
		t.Fatalf("exp the same pack accepted under a larger total, got %+v %v", st, err)
	}
}

// Delta data counts towards the total too: it is what git and the
// scanner must inflate, even when the deltas make little.
func TestScanPackCountsDeltaData(t *testing.T) {
	t.Parallel()
	blob := []byte("base\n")
	data := append(append(varint(uint64(len(blob))), varint(1)...), make([]byte, 1<<20)...)
	objs := []testObj{blobObj(blob)}
	for range 8 {
		objs = append(objs, ofsDelta(0, data))
	}
	lim := packLimits{packBytes: 1 << 30, objectBytes: 2 << 20, totalBytes: 4 << 20, hashLen: 20}
	_, st, err := scanBytes(buildPack(t, 20, objs...), lim)
	wantErr(t, err, ErrTooLarge)
	if st.Deltas != 4 || st.Inflated > 10 {
		t.Fatalf("exp the fourth delta's data to cross 4 MiB while the objects are a few bytes, got %+v", st)
	}
}

// Every way a pack can lie or break is refused, as the right kind of
// error, and nothing after the point of refusal is handed on.
func TestScanPackRefusesBrokenPacks(t *testing.T) {
	t.Parallel()
	blob := []byte("hello, world\n")
	good := buildPack(t, 20, blobObj(blob), ofsDelta(0, insertDelta(uint64(len(blob)), []byte("bye\n"))))
	lying := blobObj([]byte("short"))
	lying.z = zlibOf(bytes.Repeat([]byte("x"), 1<<20)) // declares 5, inflates to 1 MiB
	under := blobObj(bytes.Repeat([]byte("y"), 100))
	under.size = 1000
	bigDecl := blobObj(blob)
	bigDecl.size = 100 << 20
	hugeDecl := blobObj(blob)
	hugeDecl.size = 1 << 56
	overDecl := blobObj(blob)
	overDecl.size = 1 << 62 // git refuses a size varint this long
	badType := blobObj(blob)
	badType.typ = 5
	zeroType := blobObj(blob)
	zeroType.typ = 0
	bigRef := refDelta(bytes.Repeat([]byte{1}, 20), append(varint(10), varint(1<<40)...))
	longVarint := ofsDelta(0, append(bytes.Repeat([]byte{0x80}, 11), 1))
	shortDelta := ofsDelta(0, []byte{0x85})
	badZ := blobObj(blob)
	badZ.z = []byte{0x78, 0x9c, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
	badSum := bytes.Clone(good)
	badSum[len(badSum)-1] ^= 1
	hdr := func(version, count uint32) []byte {
		return []byte{'P', 'A', 'C', 'K', 0, 0, 0, byte(version), byte(count >> 24), byte(count >> 16), byte(count >> 8), byte(count)}
	}
	ofsOut := bytes.Clone(buildPack(t, 20, blobObj(blob), ofsDelta(0, insertDelta(13, []byte("x")))))
	// The delta's base offset byte (after the blob and its one-byte
	// header) points before the pack.
	ofsOut[len(buildPack(t, 20, blobObj(blob)))-20+1] = 0x7f

	tests := []struct {
		name string
		pack []byte
		exp  error
	}{
		{"empty", nil, ErrRejected},
		{"garbage", []byte("this is not a pack, not at all\n"), ErrRejected},
		{"version-4", append(hdr(4, 0), packSum(20, hdr(4, 0))...), ErrRejected},
		{"count-too-big", append(hdr(2, 1<<31), make([]byte, 100)...), ErrTooLarge},
		{"count-more-than-objects", withSum(append(hdr(2, 3), good[12:len(good)-20]...)), ErrRejected},
		{"lying-blob", buildPack(t, 20, blobObj(blob), lying), ErrRejected},
		{"blob-short-of-its-size", buildPack(t, 20, under), ErrRejected},
		{"declared-over-limit", buildPack(t, 20, bigDecl), ErrTooLarge},
		{"declared-huge", buildPack(t, 20, hugeDecl), ErrTooLarge},
		{"declared-over-64-bits", buildPack(t, 20, overDecl), ErrRejected},
		{"type-5", buildPack(t, 20, badType), ErrRejected},
		{"type-0", buildPack(t, 20, zeroType), ErrRejected},
		{"ref-delta-huge-result", buildPack(t, 20, bigRef), ErrTooLarge},
		{"delta-varint-too-long", buildPack(t, 20, blobObj(blob), longVarint), ErrRejected},
		{"delta-too-short", buildPack(t, 20, blobObj(blob), shortDelta), ErrRejected},
		{"ofs-before-pack", ofsOut, ErrRejected},
		{"bad-zlib", buildPack(t, 20, badZ), ErrRejected},
		{"bad-checksum", badSum, ErrRejected},
		{"junk-after", append(bytes.Clone(good), 'x'), ErrRejected},
		{"sha256-pack-read-as-sha1", buildPack(t, 32, blobObj(blob)), ErrRejected},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := scanBytes(tc.pack, scanLimits(20))
			wantErr(t, err, tc.exp)
			t.Logf("refused: %v", err)
			if !bytes.HasPrefix(tc.pack, got) {
				t.Fatal("exp what was handed on to be a prefix of the pack")
			}
			if len(tc.pack) >= 20 && len(got) > len(tc.pack)-20 {
				t.Fatalf("exp the trailer held back, got %d of %d bytes", len(got), len(tc.pack))
			}
		})
	}
	// Every truncation of a good pack is refused.
	for n := range len(good) {
		if _, _, err := scanBytes(good[:n], scanLimits(20)); !errors.Is(err, ErrRejected) {
			t.Fatalf("truncated at %d of %d: exp ErrRejected, got %v", n, len(good), err)
		}
	}
	if _, _, err := scanBytes(good, scanLimits(20)); err != nil {
		t.Fatalf("exp the good pack accepted, got %v", err)
	}
}

// A pack longer than the pack limit is refused when it crosses it; one
// exactly at the limit passes.
func TestScanPackLimit(t *testing.T) {
	t.Parallel()
	pack := buildPack(t, 20, blobObj(bytes.Repeat([]byte("abc"), 1000)))
	lim := scanLimits(20)
	lim.packBytes = int64(len(pack))
	if _, _, err := scanBytes(pack, lim); err != nil {
		t.Fatalf("exp a pack at the limit accepted, got %v", err)
	}
	lim.packBytes--
	_, _, err := scanBytes(pack, lim)
	wantErr(t, err, ErrTooLarge)
	if !strings.Contains(err.Error(), "larger than patina's limit of") {
		t.Fatalf("exp the pack limit named, got %q", err)
	}
}

// The scanner reads any way the stream comes (a byte at a time, with
// errors), and passes a reader's error on as it is.
func TestScanPackReaders(t *testing.T) {
	t.Parallel()
	blob := bytes.Repeat([]byte("0123456789"), 20000)
	pack := buildPack(t, 20, blobObj(blob), ofsDelta(0, copyDelta(uint64(len(blob)), 3)))
	for name, r := range map[string]io.Reader{
		"one-byte":  iotest.OneByteReader(bytes.NewReader(pack)),
		"half":      iotest.HalfReader(bytes.NewReader(pack)),
		"data-err":  iotest.DataErrReader(bytes.NewReader(pack)),
		"timeout":   iotest.TimeoutReader(bytes.NewReader(pack)),
		"plain-err": io.MultiReader(bytes.NewReader(pack[:100]), iotest.ErrReader(errBoom)),
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := scanPack(&out, r, scanLimits(20))
			switch name {
			case "timeout":
				if !errors.Is(err, iotest.ErrTimeout) {
					t.Fatalf("exp the reader's error, got %v", err)
				}
			case "plain-err":
				if !errors.Is(err, errBoom) {
					t.Fatalf("exp the reader's error, got %v", err)
				}
			default:
				if err != nil || !bytes.Equal(out.Bytes(), pack) {
					t.Fatalf("exp the pack passed whole, got %d bytes, %v", out.Len(), err)
				}
			}
		})
	}
	// A writer that fails stops the scan with its error.
	if _, err := scanPack(failWriter{}, bytes.NewReader(pack), scanLimits(20)); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("exp the writer's error, got %v", err)
	}
}

var errBoom = errors.New("boom")

// withSum is b with its sha1 trailer.
func withSum(b []byte) []byte { return append(b, packSum(20, b)...) }

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n   int64
		exp string
	}{
		{0, "0 bytes"}, {1023, "1023 bytes"}, {1024, "1 KiB"}, {1536, "1.5 KiB"},
		{512 << 20, "512 MiB"}, {4 << 30, "4 GiB"}, {8 << 30, "8 GiB"}, {1 << 62, "4 EiB"},
	} {
		if got := formatBytes(tc.n); got != tc.exp {
			t.Errorf("formatBytes(%d): exp %q, got %q", tc.n, tc.exp, got)
		}
	}
}

// The scanner never panics, hands on only a prefix of its input, and
// accepts only packs within its limits, whatever the bytes.
func FuzzScanPack(f *testing.F) {
	blob := []byte("hello, world\n")
	f.Add(buildPack(f, 20, blobObj(blob), ofsDelta(0, insertDelta(uint64(len(blob)), []byte("bye\n")))))
	f.Add(buildPack(f, 20, blobObj(blob), refDelta(make([]byte, 20), copyDelta(uint64(len(blob)), 2))))
	f.Add(buildPack(f, 20, testObj{typ: objCommit, data: []byte("tree 0\n"), size: -1}, testObj{typ: objTree, size: -1}))
	f.Add(buildPack(f, 20, blobObj(make([]byte, 4096)), ofsDelta(0, copyDelta(4096, 100))))
	f.Add([]byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00"))
	lim := packLimits{packBytes: 1 << 20, objectBytes: 64 << 10, totalBytes: 256 << 10, hashLen: 20}
	f.Fuzz(func(t *testing.T, pack []byte) {
		var out bytes.Buffer
		in := &eofReader{r: bytes.NewReader(pack)}
		st, err := scanPack(&out, in, lim)
		if !bytes.HasPrefix(pack, out.Bytes()) {
			t.Fatal("handed on bytes that are not a prefix of the input")
		}
		if err != nil {
			if !errors.Is(err, ErrRejected) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("exp ErrRejected or ErrTooLarge, got %v", err)
			}
			// All of a refused pack goes on only when it ends before
			// its objects do: git cannot take it either.
			if out.Len() == len(pack) && !in.eof {
				t.Fatalf("handed on the whole of a pack refused for %v", err)
			}
			return
		}
		if !bytes.Equal(out.Bytes(), pack) {
			t.Fatal("accepted a pack without handing it all on")
		}
		if st.Inflated+st.DeltaData > lim.totalBytes || st.Bytes != int64(len(pack)) {
			t.Fatalf("accepted beyond the limits: %+v", st)
		}
	})
}
