package egress

import (
	"crypto/rand"
	"encoding/binary"
)

// ClientHello is a minimal TLS ClientHello naming sni as it is, even an
// address (which Go's own client would never send): for tests of what
// hostile clients send.
func ClientHello(sni string) []byte {
	u16 := func(b []byte, v int) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
	var ext []byte
	// server_name
	name := u16([]byte{0}, len(sni))
	name = append(name, sni...)
	list := u16(nil, len(name))
	list = append(list, name...)
	ext = u16(ext, 0)
	ext = u16(ext, len(list))
	ext = append(ext, list...)
	// supported_versions: TLS 1.3, 1.2
	ext = u16(ext, 43)
	ext = u16(ext, 5)
	ext = append(ext, 4, 3, 4, 3, 3)
	var body []byte
	body = append(body, 3, 3) // legacy version TLS 1.2
	random := make([]byte, 32)
	_, _ = rand.Read(random)
	body = append(body, random...)
	body = append(body, 0)                            // session id
	body = append(body, 0, 4, 0x13, 0x01, 0xc0, 0x2f) // cipher suites
	body = append(body, 1, 0)                         // compression: null
	body = u16(body, len(ext))
	body = append(body, ext...)
	hs := []byte{1, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}
	hs = append(hs, body...)
	rec := []byte{0x16, 3, 1}
	rec = u16(rec, len(hs))
	return append(rec, hs...)
}
