package api

import (
	"encoding/binary"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// wireMessage is one of the four binary messages, for table tests.
type wireMessage interface {
	WireEncoder
	WireDecoder
}

func sampleEvents(n int, proxy bool) []Event {
	types := []EventType{EventCreated, EventDataChanged, EventDeleted, EventChildrenChanged, EventLockDelayEnded, EventResync, EventInvalidate, "future_type", ""}
	kinds := []WatchKind{WatchData, WatchChildren, "", "future_kind"}
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = Event{Type: types[i%len(types)], Path: "/demo/locks/job-" + strings.Repeat("x", i%7), Kind: kinds[i%len(kinds)],
			Index: uint64(1000 + i), Seq: uint64(i + 1)}
		if proxy {
			evs[i].Seq += 1 << 40
		}
	}
	return evs
}

const hexSecret = "0123456789abcdef0123456789abcdef"

// wireCases are messages every field of which is set, and edge values.
func wireCases() map[string]wireMessage {
	return map[string]wireMessage{
		"keepalive zero":  &KeepAliveRequest{},
		"keepalive full":  &KeepAliveRequest{Cell: "demo", Session: 1 << 63, Secret: hexSecret, WaitMS: 4000, AckSeq: 17, AckEpoch: 3, Proxy: "proxy-a#12", ProxyAck: 9},
		"keepalive odd":   &KeepAliveRequest{Cell: "c", Session: 1, Secret: "NOT-HEX-secret", WaitMS: -5, AckSeq: ^uint64(0)},
		"keepalive upper": &KeepAliveRequest{Cell: "c", Session: 2, Secret: strings.ToUpper(hexSecret)},
		"session zero":    &SessionResponse{},
		"session full": &SessionResponse{Session: 42, Secret: hexSecret, LeaseMS: 12000, Epoch: 1<<32 + 1, Index: 99, Events: sampleEvents(5, false),
			LeaseAgeMS: 250, KeepAliveMS: 4000, GraceMS: 45000, Proxy: "proxy-b", CacheMS: 1500, ProxyEvents: sampleEvents(3, true)},
		"session negative": &SessionResponse{LeaseMS: -1, LeaseAgeMS: -2, CacheMS: -3, Events: sampleEvents(9, false)},
		"batch zero":       &KeepAliveBatchRequest{},
		"batch full": &KeepAliveBatchRequest{Cell: "payments", Proxy: "proxy-a", WaitMS: 900, Epoch: 7,
			Sessions: []uint64{1, 2, 1 << 50}, AgeMS: []int64{0, 120, -1}, Secrets: []string{hexSecret, "", "odd"},
			Acks: []BatchAck{{Session: 2, AckEpoch: 7, AckSeq: 5, Seen: 6, New: true}, {Session: 1 << 50}}},
		"batch ragged":        &KeepAliveBatchRequest{Sessions: []uint64{1, 2}, AgeMS: []int64{5}},
		"batch response zero": &KeepAliveBatchResponse{},
		"batch response full": &KeepAliveBatchResponse{Epoch: 7, Index: 1234, Sessions: []BatchSession{
			{Session: 1, LeaseMS: 12000, Events: sampleEvents(4, false)},
			{Session: 2, Error: &Error{Code: CodeSessionExpired, Message: "session 2 expired", Leader: "127.0.0.1:7001", Cell: "demo"}},
			{Session: 3, Error: &Error{Code: CodeUnavailable}},
		}},
	}
}

// fresh is a zero message of m's type.
func fresh(m wireMessage) wireMessage {
	return reflect.New(reflect.TypeOf(m).Elem()).Interface().(wireMessage)
}

// TestWireRoundTrip: every field of every message comes back exactly, and
// the binary decode agrees with a JSON round trip of the same message.
func TestWireRoundTrip(t *testing.T) {
	for name, m := range wireCases() {
		t.Run(name, func(t *testing.T) {
			b := m.AppendWire(nil)
			if !IsWire(b) {
				t.Fatalf("encoding starts %#x, not the version", b[0])
			}
			got := fresh(m)
			if err := got.UnmarshalWire(b); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
			}
			j, _ := json.Marshal(m)
			viaJSON := fresh(m)
			if err := json.Unmarshal(j, viaJSON); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normalize(got), normalize(viaJSON)) {
				t.Fatalf("binary and JSON differ:\nbinary %+v\n  json %+v", got, viaJSON)
			}
		})
	}
}

// normalize maps empty lists to nil (JSON keeps a non-omitempty [] as
// empty; binary decodes it as nil), by a JSON round trip through any.
func normalize(m wireMessage) string {
	b, _ := json.Marshal(m)
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	for k, x := range v {
		if l, ok := x.([]any); (ok && len(l) == 0) || x == nil {
			delete(v, k)
		}
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// TestWireRefusesBadInput: truncated, trailing, wrong version or kind,
// oversize bodies and over-long fields are refused bad_request.
func TestWireRefusesBadInput(t *testing.T) {
	full := wireCases()["session full"].AppendWire(nil)
	long := (&KeepAliveRequest{Cell: strings.Repeat("c", MaxRequestNameLen+1)}).AppendWire(nil)
	longPath := (&SessionResponse{Events: []Event{{Path: strings.Repeat("p", MaxPathLen+1)}}}).AppendWire(nil)
	cases := []struct {
		name string
		into wireMessage
		body []byte
		want string
	}{
		{"empty", &SessionResponse{}, nil, "truncated header"},
		{"json", &SessionResponse{}, []byte(`{"session":1}`), "unsupported version"},
		{"version 2", &SessionResponse{}, append([]byte{2}, full[1:]...), "unsupported version 2"},
		{"wrong kind", &KeepAliveRequest{}, full, "message kind 2, want 1"},
		{"trailing", &SessionResponse{}, append(append([]byte{}, full...), 0), "1 trailing bytes"},
		{"long cell", &KeepAliveRequest{}, long, "cell: 129 bytes, limit 128"},
		{"long path", &SessionResponse{}, longPath, "limit 1024"},
		{"oversize", &KeepAliveRequest{}, make([]byte, MaxRequestBody+1), "limit"},
		{"bad bool", &KeepAliveBatchRequest{}, append(wireHeader(nil, wireBatch), 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 7), "boolean byte 7"},
		{"bad code", &SessionResponse{}, append(wireHeader(nil, wireSession), 0, 0, 0, 0, 0, 1, 99, 0, 0, 0, 0), "unknown code 99"},
		{"bad secret word", &KeepAliveRequest{}, append(wireHeader(nil, wireKeepAlive), 0, 1, 3), "bad length word 3"},
	}
	for i := wireHeaderLen; i < len(full); i++ {
		cases = append(cases, struct {
			name string
			into wireMessage
			body []byte
			want string
		}{"truncated", &SessionResponse{}, full[:i], "binary session reply"})
	}
	for _, c := range cases {
		err := c.into.UnmarshalWire(c.body)
		if CodeOf(err) != CodeBadRequest || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s (%d bytes): got %v, want bad_request with %q", c.name, len(c.body), err, c.want)
		}
	}
}

// TestWireDecodeRefusesOverLimit: a list one past its named limit is
// refused, though every item is there (mutant api_broken_wirecount
// takes it), and a count past the bytes left allocates nothing.
func TestWireDecodeRefusesOverLimit(t *testing.T) {
	events := (&SessionResponse{Events: make([]Event, MaxReplyEvents+1)}).AppendWire(nil)
	acks := (&KeepAliveBatchRequest{Acks: make([]BatchAck, MaxBatchSessions+1)}).AppendWire(nil)
	batch := (&KeepAliveBatchResponse{Sessions: make([]BatchSession, MaxBatchSessions+1)}).AppendWire(nil)
	huge := binary.AppendUvarint(wireHeader(nil, wireBatchResponse), 0)
	huge = binary.AppendUvarint(binary.AppendUvarint(huge, 0), 100_000)
	cases := []struct {
		name string
		into wireMessage
		body []byte
		want string
	}{
		{"events", &SessionResponse{}, events, "limit 8192"},
		{"acks", &KeepAliveBatchRequest{}, acks, "limit 200000"},
		{"batch sessions", &KeepAliveBatchResponse{}, batch, "limit 200000"},
		{"count past input", &KeepAliveBatchResponse{}, huge, "bytes left"},
	}
	for _, c := range cases {
		err := c.into.UnmarshalWire(c.body)
		if CodeOf(err) != CodeBadRequest || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want bad_request with %q", c.name, err, c.want)
		}
	}
	ok := (&SessionResponse{Events: make([]Event, MaxReplyEvents)}).AppendWire(nil)
	if err := (&SessionResponse{}).UnmarshalWire(ok); err != nil {
		t.Errorf("%d events (the limit): %v", MaxReplyEvents, err)
	}
}

// TestWireErrorTextCut: an error message past MaxWireText is cut on a
// rune boundary, and still decodes.
func TestWireErrorTextCut(t *testing.T) {
	msg := strings.Repeat("é", MaxWireText) // 2 bytes a rune
	b := (&KeepAliveBatchResponse{Sessions: []BatchSession{{Session: 1, Error: &Error{Code: CodeInternal, Message: msg}}}}).AppendWire(nil)
	var got KeepAliveBatchResponse
	if err := got.UnmarshalWire(b); err != nil {
		t.Fatal(err)
	}
	if m := got.Sessions[0].Error.Message; len(m) != MaxWireText || !strings.HasPrefix(msg, m) {
		t.Fatalf("cut message: %d bytes", len(m))
	}
}

func TestIsWireContentType(t *testing.T) {
	for ct, want := range map[string]bool{
		ContentTypeWire: true, "Application/VND.lockd.v1+bin; x=1": true, "application/json": false, "": false,
		"application/vnd.lockd.v2+bin": false,
	} {
		if got := IsWireContentType([]byte(ct)); got != want {
			t.Errorf("%q: %v, want %v", ct, got, want)
		}
	}
}

// fuzzDecode feeds b to a decoder: it must never panic, and what it
// accepts must encode back to exactly b's message.
func fuzzDecode(t *testing.T, into wireMessage, b []byte) {
	if err := into.UnmarshalWire(b); err != nil {
		if CodeOf(err) != CodeBadRequest {
			t.Fatalf("error %v is not bad_request", err)
		}
		return
	}
	again := fresh(into)
	if err := again.UnmarshalWire(into.AppendWire(nil)); err != nil || !reflect.DeepEqual(again, into) {
		t.Fatalf("re-encoding what was accepted: %v\n got %+v\nwant %+v", err, again, into)
	}
}

func seedFuzz(f *testing.F, kind byte) {
	for _, m := range wireCases() {
		if b := m.AppendWire(nil); b[1] == kind {
			f.Add(b)
		}
	}
	f.Add([]byte{WireVersion, kind, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
}

func FuzzWireKeepAliveRequest(f *testing.F) {
	seedFuzz(f, wireKeepAlive)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, &KeepAliveRequest{}, b) })
}

func FuzzWireSessionResponse(f *testing.F) {
	seedFuzz(f, wireSession)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, &SessionResponse{}, b) })
}

func FuzzWireBatchRequest(f *testing.F) {
	seedFuzz(f, wireBatch)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, &KeepAliveBatchRequest{}, b) })
}

func FuzzWireBatchResponse(f *testing.F) {
	seedFuzz(f, wireBatchResponse)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, &KeepAliveBatchResponse{}, b) })
}
