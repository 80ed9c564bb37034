package api

// The compact binary encoding of the hot KeepAlive traffic (issue 25): a
// client's KeepAlive and its reply, a lockproxy's batch and its reply.
// JSON stays the API's encoding for everything else and for people; a
// request sent with Content-Type ContentTypeWire is answered in it.
//
// Layout (docs/api.md, "Binary KeepAlives"): a version byte
// (WireVersion), a kind byte (which message), then the message's fields
// in a fixed order: unsigned integers as uvarints, signed ones as zig-zag
// varints, strings as a uvarint length and their bytes, lists as a
// uvarint count and their items. Decoding is bounded: every string and
// list by a named limit, every count by the bytes left (nothing is
// allocated for what the input does not hold), the whole body by the
// route's body limit; truncated, oversized or trailing input is refused
// bad_request.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"unicode/utf8"

	"github.com/lockservice/lockd/internal/mutant"
)

const (
	// ContentTypeWire is the media type of the binary encoding. A request
	// sent with it carries a binary body and gets a binary reply on
	// success; a refusal is answered in JSON with its usual status.
	ContentTypeWire = "application/vnd.lockd.v1+bin"
	// WireVersion is the first byte of every binary body. It is not a
	// byte a JSON text can start with, so a reader tells the two apart
	// by it. A body of another version is refused bad_request (the
	// client then falls back to JSON).
	WireVersion byte = 1

	// MaxWireText bounds the message, leader and cell of an error in a
	// binary reply: the encoder cuts a longer message there.
	MaxWireText = 4096
	// MaxReplyBody bounds a binary reply's body (the SDK reads at most
	// this much of any reply).
	MaxReplyBody = 64 << 20
	// MaxReplyEvents bounds the events (and proxy events) of one session
	// in a binary reply: a leader queues at most MaxPendingEvents, and a
	// proxy may hold the queue a resync replaced besides the new one.
	MaxReplyEvents = 2 * MaxPendingEvents
)

// The kinds of binary message: the byte after the version. A body of
// another kind than the one a route takes is refused.
const (
	wireKeepAlive       byte = 1 // KeepAliveRequest
	wireSession         byte = 2 // SessionResponse
	wireBatch           byte = 3 // KeepAliveBatchRequest
	wireBatchResponse   byte = 4 // KeepAliveBatchResponse
	wireHeaderLen            = 2 // version, kind
	wireSecretPacked         = 1 // a secret's length word for 16 packed bytes
	wireSecretPackedLen      = SessionSecretLen / 2
)

// WireEncoder is a message with a binary encoding: AppendWire appends it
// to b.
type WireEncoder interface {
	AppendWire(b []byte) []byte
}

// WireDecoder is a message with a binary encoding: UnmarshalWire replaces
// the message with the one b holds, or fails bad_request.
type WireDecoder interface {
	UnmarshalWire(b []byte) error
}

// IsWireContentType reports whether a Content-Type header names the
// binary encoding (parameters after ';' ignored).
func IsWireContentType(ct []byte) bool {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return bytes.EqualFold(bytes.TrimSpace(ct), []byte(ContentTypeWire))
}

// IsWire reports whether body is a binary body (starts with WireVersion)
// rather than JSON.
func IsWire(body []byte) bool { return len(body) > 0 && body[0] == WireVersion }

// --- encoding ---

func wireHeader(b []byte, kind byte) []byte { return append(b, WireVersion, kind) }

// maxVarint is the most bytes a 64-bit varint takes; sizes from it are
// capacity hints only.
const maxVarint = binary.MaxVarintLen64

// grow makes room for about n more bytes in b at once.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	return append(b, make([]byte, n)...)[:len(b)]
}

func appendUint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendInt(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendSecret writes a session secret: a leader's (SessionSecretLen
// lower-case hex characters) as its 16 bytes after the length word
// wireSecretPacked, any other string as 2×len and its bytes.
func appendSecret(b []byte, s string) []byte {
	if packable(s) {
		b = append(b, wireSecretPacked)
		var raw [wireSecretPackedLen]byte
		_, _ = hex.Decode(raw[:], []byte(s))
		return append(b, raw[:]...)
	}
	b = binary.AppendUvarint(b, 2*uint64(len(s)))
	return append(b, s...)
}

// packable: s is lower-case hex of SessionSecretLen characters (and so
// decodes back to itself).
func packable(s string) bool {
	if len(s) != SessionSecretLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// cutText cuts s to at most max bytes, on a rune boundary.
func cutText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// --- decoding ---

// wireReader reads one binary message. Its first error sticks: every
// later read returns a zero value, and err says what and where.
type wireReader struct {
	b    []byte
	off  int
	what string // the message, for errors
	err  *Error
}

// newWireReader checks b's size (at most max bytes) and header (version,
// kind).
func newWireReader(b []byte, kind byte, max int, what string) wireReader {
	r := wireReader{b: b, what: what}
	switch {
	case len(b) > max:
		r.fail("%d bytes, limit %d", len(b), max)
	case len(b) < wireHeaderLen:
		r.fail("truncated header")
	case b[0] != WireVersion:
		r.fail("unsupported version %d (this server speaks %d)", b[0], WireVersion)
	case b[1] != kind:
		r.fail("message kind %d, want %d", b[1], kind)
	default:
		r.off = wireHeaderLen
	}
	return r
}

func (r *wireReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = Errorf(CodeBadRequest, "binary %s at byte %d: "+format, append([]any{r.what, r.off}, args...)...)
	}
}

// end is the message's error: the first one met, or trailing bytes.
func (r *wireReader) end() error {
	if r.err == nil && r.off != len(r.b) {
		r.fail("%d trailing bytes", len(r.b)-r.off)
	}
	if r.err != nil {
		return r.err
	}
	return nil
}

func (r *wireReader) left() int { return len(r.b) - r.off }

func (r *wireReader) uint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("%s: truncated or overlong integer", field)
		return 0
	}
	r.off += n
	return v
}

func (r *wireReader) int(field string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail("%s: truncated or overlong integer", field)
		return 0
	}
	r.off += n
	return v
}

func (r *wireReader) byte(field string) byte {
	if r.err != nil {
		return 0
	}
	if r.left() < 1 {
		r.fail("%s: truncated", field)
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *wireReader) bool(field string) bool {
	switch v := r.byte(field); v {
	case 0:
		return false
	case 1:
		return true
	default:
		r.fail("%s: boolean byte %d", field, v)
		return false
	}
}

// bytes reads n bytes of field (n already bounded by its limit).
func (r *wireReader) bytes(n uint64, field string) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(r.left()) {
		r.fail("%s: %d bytes, %d left", field, n, r.left())
		return nil
	}
	r.off += int(n)
	return r.b[r.off-int(n) : r.off]
}

// string reads a string of at most max bytes.
func (r *wireReader) string(max int, field string) string {
	n := r.uint(field)
	if r.err == nil && n > uint64(max) {
		r.fail("%s: %d bytes, limit %d", field, n, max)
	}
	if n == 0 {
		return ""
	}
	return string(r.bytes(n, field))
}

// secret reads what appendSecret wrote.
func (r *wireReader) secret(field string) string {
	w := r.uint(field)
	if w == wireSecretPacked {
		raw := r.bytes(wireSecretPackedLen, field)
		if raw == nil {
			return ""
		}
		var s [SessionSecretLen]byte
		hex.Encode(s[:], raw)
		return string(s[:])
	}
	if r.err == nil && (w%2 != 0 || w/2 > MaxSecretLen) {
		r.fail("%s: bad length word %d (limit %d bytes)", field, w, MaxSecretLen)
	}
	if w == 0 {
		return ""
	}
	return string(r.bytes(w/2, field))
}

// count reads a list's length: at most max items, each at least minSize
// bytes of what is left, so nothing is allocated beyond the input.
func (r *wireReader) count(max, minSize int, field string) int {
	n := r.uint(field)
	switch {
	case r.err != nil:
		return 0
	case n > uint64(max) && !mutant.On(mutant.WireCount):
		r.fail("%s: %d items, limit %d", field, n, max)
		return 0
	case n > uint64(r.left()/minSize):
		r.fail("%s: %d items, only %d bytes left", field, n, r.left())
		return 0
	}
	return int(n)
}
