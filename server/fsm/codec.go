package fsm

// The log codec: how a Command (a Raft log entry) and a Result (kept per
// session for dedupe, and in snapshots) are written as bytes.
//
// # Versions
//
// The first byte says which codec wrote the rest:
//
//   - '{' (0x7b): version 0, JSON (encoding/json of the struct and its
//     json tags), what every entry was before issue 25. Only decoded: a
//     log or snapshot written then keeps decoding forever.
//   - 0x01: version 1, the binary codec below. Encode always writes it.
//
// Any other first byte, or an empty input, is an error.
//
// # Version 1
//
// A message is a sequence of fields in strictly ascending tag order, each a
// tag byte (1 to 127) followed by its payload, and at the top level a 0x00
// byte ending the message; nothing may follow it. So a truncated entry never
// decodes as a shorter one. A field whose value is zero (0, "", false, nil,
// an empty slice) is left out and decodes as zero, so it costs nothing;
// a pointer field (Command.Version, Quota, Restored; Result.Err, Node) is
// written when non-nil, even pointing at zero, and so keeps nil apart from
// a pointer to zero. Payloads, by the field's kind:
//
//   - uvarint: encoding/binary's unsigned varint (uint64 fields; op and
//     lock-mode codes);
//   - varint: encoding/binary's zig-zag varint (int64 and int fields);
//   - flag: no payload, the tag alone says true;
//   - string, bytes: a uvarint length, then the bytes;
//   - message: a uvarint length, then that many bytes of fields in
//     ascending tag order (no end byte: the length ends it);
//   - list: a uvarint count, then the elements (uvarints, strings or
//     length-prefixed messages).
//
// The tags of each message are the constants in codec_command.go and
// codec_result.go, and so are the codes of ops and lock modes: they are
// the format. Never renumber, reuse or change the kind of one.
//
// # Adding a field
//
// Give it the next unused tag of its message (a new op or lock mode: the
// next code) and write it only when non-zero. Entries without it keep
// their meaning and decode on both sides. A version-1 decoder refuses a
// tag it does not know (the entry is then refused as undecodable on that
// replica), so a proposer may write the new field only once every replica
// of the cell runs a decoder that knows it, as with any new command
// field. A change to an existing field's kind or meaning is a new version:
// a new first byte (0x02) with its own decoder beside this one, which
// stays as it is so that version-1 entries decode forever.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lockservice/lockd/api"
)

// The first byte of an encoded command or result.
const (
	codecJSON byte = '{'  // version 0: JSON, decoded only
	codecV1   byte = 0x01 // version 1: binary
	codecEnd  byte = 0x00 // ends a version-1 top-level message
	// codecMaxTag is the highest tag of version 1; a tag byte above it is
	// refused (room for a wider tag encoding in a later version).
	codecMaxTag byte = 0x7f
)

// Bounds on what a version-1 decoder accepts, checked before anything is
// allocated; no length or count may exceed the bytes left either. They are
// looser than the state's own checks (a 64 KiB value, a 1 KiB path), so
// that an oversized value is refused by the state with its own code, not
// as undecodable.
const (
	// maxCodecBytes bounds a string or byte field: nothing larger arrives
	// in one API request.
	maxCodecBytes = api.MaxRequestBody
	// maxCodecSessions bounds confirm's sessions: at most every session
	// of a cell (the session manager sends MaxSessionsPerConfirm).
	maxCodecSessions = api.MaxSessionsPerCell
	// maxCodecNodes bounds one stage page's nodes (server/cell sends at
	// most its MaxExportPage, 1 000): a few times that, so a page of empty
	// nodes cannot make the decoder allocate much more than it was sent.
	// A larger page is written in JSON (encodeCommand).
	maxCodecNodes = 4096
	// maxCodecPrefixes bounds a restore plan's prefixes.
	maxCodecPrefixes = 1 << 16
)

// errCodecEmpty is the error of an empty entry or result.
var errCodecEmpty = errors.New("empty encoding")

// codecVersionError names an unknown first byte.
func codecVersionError(b byte) error {
	return fmt.Errorf("encoding starts with byte 0x%02x: neither JSON ('{') nor a known binary version (0x%02x)", b, codecV1)
}

// decodeJSON decodes a version-0 (JSON) command or result.
func decodeJSON[T any](b []byte) (T, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}

// --- encoding ---

// encoder appends version-1 fields to b.
// encoder appends a message's fields; over records a field its decoder
// would refuse (longer than maxCodecBytes), so that the caller writes the
// entry in JSON instead: an encoder never writes what no decoder reads.
type encoder struct {
	b    []byte
	over bool
}

func (e *encoder) uvarint(tag byte, v uint64) {
	if v != 0 {
		e.b = binary.AppendUvarint(append(e.b, tag), v)
	}
}

func (e *encoder) varint(tag byte, v int64) {
	if v != 0 {
		e.b = binary.AppendVarint(append(e.b, tag), v)
	}
}

func (e *encoder) flag(tag byte, v bool) {
	if v {
		e.b = append(e.b, tag)
	}
}

func (e *encoder) str(tag byte, s string) {
	e.over = e.over || len(s) > maxCodecBytes
	if s != "" {
		e.b = append(binary.AppendUvarint(append(e.b, tag), uint64(len(s))), s...)
	}
}

func (e *encoder) bytes(tag byte, v []byte) {
	e.over = e.over || len(v) > maxCodecBytes
	if len(v) != 0 {
		e.b = append(binary.AppendUvarint(append(e.b, tag), uint64(len(v))), v...)
	}
}

// begin starts a length-prefixed message (after its tag, if any): it
// reserves one length byte and returns where the body starts, for end.
func (e *encoder) begin() int {
	e.b = append(e.b, 0)
	return len(e.b)
}

// end writes the length of the message begun at start, moving the body
// up if the length takes more than the one byte reserved.
func (e *encoder) end(start int) {
	n := len(e.b) - start
	if n < 0x80 {
		e.b[start-1] = byte(n)
		return
	}
	var l [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(l[:], uint64(n))
	e.b = append(e.b, l[:k-1]...)
	copy(e.b[start-1+k:], e.b[start:start+n])
	copy(e.b[start-1:], l[:k])
}

// --- decoding ---

// decoder reads version-1 fields from b. The first error sticks: every
// later read returns zero, and the caller returns err.
type decoder struct {
	b    []byte
	last byte // the last tag read: tags must ascend
	top  bool // the top-level message, which ends with codecEnd
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

// next returns the next field's tag, or 0 at the end of the message (or
// after an error).
func (d *decoder) next() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		if d.top {
			d.fail("truncated: no end byte")
		}
		return 0
	}
	t := d.b[0]
	d.b = d.b[1:]
	switch {
	case t == codecEnd && d.top:
		if len(d.b) != 0 {
			d.fail("%d bytes after the end", len(d.b))
		}
		return 0
	case t > codecMaxTag:
		d.fail("tag byte 0x%02x out of range", t)
		return 0
	case t <= d.last:
		d.fail("field %d after field %d: fields out of order or repeated", t, d.last)
		return 0
	}
	d.last = t
	return t
}

// unknown refuses a tag the message does not have.
func (d *decoder) unknown(msg string, tag byte) {
	d.fail("%s: unknown field %d (written by a newer version?)", msg, tag)
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad or truncated uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad or truncated varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a varint that must fit an int.
func (d *decoder) int() int {
	v := d.varint()
	if int64(int(v)) != v {
		d.fail("%d does not fit an int", v)
		return 0
	}
	return int(v)
}

// length reads a length or count: at most limit, and at most the bytes
// left (every element takes at least one byte).
func (d *decoder) length(what string, limit int) int {
	v := d.uvarint()
	switch {
	case d.err != nil:
		return 0
	case v > uint64(limit):
		d.fail("%s of %d over the limit %d", what, v, limit)
		return 0
	case v > uint64(len(d.b)):
		d.fail("truncated: %s of %d, %d bytes left", what, v, len(d.b))
		return 0
	}
	return int(v)
}

// raw reads n bytes, aliasing the input.
func (d *decoder) raw(n int) []byte {
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	return string(d.raw(d.length("string length", maxCodecBytes)))
}

// bytes reads a byte field into a new slice (nil if empty): the state
// keeps values, and must not keep the entry's buffer alive.
func (d *decoder) bytes() []byte {
	n := d.length("bytes length", maxCodecBytes)
	if n == 0 {
		return nil
	}
	return append([]byte(nil), d.raw(n)...)
}

// sub reads a length-prefixed message and returns its decoder; the
// caller reads it to its end and passes its error up with done.
func (d *decoder) sub(what string) decoder {
	return decoder{b: d.raw(d.length(what+" length", len(d.b)))}
}

// done takes a sub-message's error.
func (d *decoder) done(what string, s *decoder) {
	if s.err != nil {
		d.fail("%s: %w", what, s.err)
	}
}

// count reads a list's element count.
func (d *decoder) count(what string, limit int) int {
	return d.length(what+" count", limit)
}

// decodeVersioned decodes a command or result of any version: JSON
// (version 0), or version 1 field by field (field reads one tagged field
// into the value).
func decodeVersioned[T any](b []byte, field func(*decoder, *T, byte)) (T, error) {
	var v T
	if len(b) == 0 {
		return v, errCodecEmpty
	}
	switch b[0] {
	case codecJSON:
		return decodeJSON[T](b)
	case codecV1:
		d := decoder{b: b[1:], top: true}
		for t := d.next(); t != 0; t = d.next() {
			field(&d, &v, t)
		}
		if d.err != nil {
			var zero T
			return zero, d.err
		}
		return v, nil
	}
	return v, codecVersionError(b[0])
}
