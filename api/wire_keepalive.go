package api

// The binary encoding (wire.go) of the four KeepAlive messages and their
// parts (events, acknowledgements, a batch reply's sessions and errors).
// Field order is the layout table's in docs/api.md; a new field is a new
// WireVersion.

// Least encoded sizes of list items, for wireReader.count.
const (
	minEventBytes        = 5 // type, path, kind, index, seq
	minAckBytes          = 5 // session, ack epoch, ack seq, seen, new
	minBatchSessionBytes = 4 // session, lease, events, error flag
)

// eventTypes and watchKinds are the values a one-byte code stands for;
// code 0 is a literal string that follows (a value this table lacks).
var (
	eventTypes = [...]EventType{1: "", EventCreated, EventDataChanged, EventDeleted, EventChildrenChanged,
		EventLockDelayEnded, EventResync, EventInvalidate}
	watchKinds = [...]WatchKind{1: "", WatchData, WatchChildren}
)

// appendCode writes s as its code in table (index ≥ 1), else 0 and s.
func appendCode[T ~string](b []byte, table []T, s T) []byte {
	for i := 1; i < len(table); i++ {
		if table[i] == s {
			return append(b, byte(i))
		}
	}
	return appendString(append(b, 0), string(s))
}

// readCode reads what appendCode wrote.
func readCode[T ~string](r *wireReader, table []T, field string) T {
	c := r.byte(field)
	switch {
	case r.err != nil:
		return ""
	case c == 0:
		return T(r.string(MaxRequestNameLen, field))
	case int(c) >= len(table):
		r.fail("%s: unknown code %d", field, c)
		return ""
	}
	return table[c]
}

// eventsSize is about what appendEvents writes for evs (a capacity hint).
func eventsSize(evs []Event) int {
	n := maxVarint
	for i := range evs {
		n += len(evs[i].Path) + 3 + 2*maxVarint
	}
	return n
}

func appendEvents(b []byte, evs []Event) []byte {
	b = appendUint(b, uint64(len(evs)))
	for i := range evs {
		e := &evs[i]
		b = appendCode(b, eventTypes[:], e.Type)
		b = appendString(b, e.Path)
		b = appendCode(b, watchKinds[:], e.Kind)
		b = appendUint(b, e.Index)
		b = appendUint(b, e.Seq)
	}
	return b
}

func (r *wireReader) events(field string) []Event {
	n := r.count(MaxReplyEvents, minEventBytes, field)
	if n == 0 {
		return nil
	}
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = Event{ // field names constant: no allocation per event
			Type:  readCode(r, eventTypes[:], "event.type"),
			Path:  r.string(MaxPathLen, "event.path"),
			Kind:  readCode(r, watchKinds[:], "event.kind"),
			Index: r.uint("event.index"),
			Seq:   r.uint("event.seq"),
		}
	}
	return evs
}

// AppendWire appends the request's binary encoding to b.
func (q KeepAliveRequest) AppendWire(b []byte) []byte {
	b = grow(b, wireHeaderLen+len(q.Cell)+len(q.Secret)+len(q.Proxy)+6*maxVarint)
	b = wireHeader(b, wireKeepAlive)
	b = appendString(b, q.Cell)
	b = appendUint(b, q.Session)
	b = appendSecret(b, q.Secret)
	b = appendInt(b, q.WaitMS)
	b = appendUint(b, q.AckSeq)
	b = appendUint(b, q.AckEpoch)
	b = appendString(b, q.Proxy)
	return appendUint(b, q.ProxyAck)
}

// UnmarshalWire decodes a binary KeepAliveRequest (at most MaxRequestBody
// bytes).
func (q *KeepAliveRequest) UnmarshalWire(b []byte) error {
	r := newWireReader(b, wireKeepAlive, MaxRequestBody, "keepalive request")
	v := KeepAliveRequest{
		Cell:     r.string(MaxRequestNameLen, "cell"),
		Session:  r.uint("session"),
		Secret:   r.secret("secret"),
		WaitMS:   r.int("wait_ms"),
		AckSeq:   r.uint("ack_seq"),
		AckEpoch: r.uint("ack_epoch"),
		Proxy:    r.string(MaxRequestNameLen, "proxy"),
		ProxyAck: r.uint("proxy_ack"),
	}
	if err := r.end(); err != nil {
		return err
	}
	*q = v
	return nil
}

// AppendWire appends the reply's binary encoding to b.
func (s SessionResponse) AppendWire(b []byte) []byte {
	b = grow(b, wireHeaderLen+len(s.Secret)+len(s.Proxy)+12*maxVarint+eventsSize(s.Events)+eventsSize(s.ProxyEvents))
	b = wireHeader(b, wireSession)
	b = appendUint(b, s.Session)
	b = appendSecret(b, s.Secret)
	b = appendInt(b, s.LeaseMS)
	b = appendUint(b, s.Epoch)
	b = appendUint(b, s.Index)
	b = appendEvents(b, s.Events)
	b = appendInt(b, s.LeaseAgeMS)
	b = appendInt(b, s.KeepAliveMS)
	b = appendInt(b, s.GraceMS)
	b = appendString(b, s.Proxy)
	b = appendInt(b, s.CacheMS)
	return appendEvents(b, s.ProxyEvents)
}

// UnmarshalWire decodes a binary SessionResponse (at most MaxReplyBody
// bytes; at most MaxReplyEvents events of each kind).
func (s *SessionResponse) UnmarshalWire(b []byte) error {
	r := newWireReader(b, wireSession, MaxReplyBody, "session reply")
	v := SessionResponse{
		Session:     r.uint("session"),
		Secret:      r.secret("secret"),
		LeaseMS:     r.int("lease_ms"),
		Epoch:       r.uint("epoch"),
		Index:       r.uint("index"),
		Events:      r.events("events"),
		LeaseAgeMS:  r.int("lease_age_ms"),
		KeepAliveMS: r.int("keepalive_ms"),
		GraceMS:     r.int("grace_ms"),
		Proxy:       r.string(MaxRequestNameLen, "proxy"),
		CacheMS:     r.int("cache_ms"),
		ProxyEvents: r.events("proxy_events"),
	}
	if err := r.end(); err != nil {
		return err
	}
	*s = v
	return nil
}

// AppendWire appends the batch's binary encoding to b.
func (q KeepAliveBatchRequest) AppendWire(b []byte) []byte {
	b = grow(b, wireHeaderLen+len(q.Cell)+len(q.Proxy)+6*maxVarint+
		len(q.Sessions)*maxVarint+len(q.AgeMS)*3+len(q.Secrets)*(1+wireSecretPackedLen)+len(q.Acks)*(2+4*maxVarint))
	b = wireHeader(b, wireBatch)
	b = appendString(b, q.Cell)
	b = appendString(b, q.Proxy)
	b = appendInt(b, q.WaitMS)
	b = appendUint(b, q.Epoch)
	b = appendUint(b, uint64(len(q.Sessions)))
	for _, id := range q.Sessions {
		b = appendUint(b, id)
	}
	b = appendUint(b, uint64(len(q.AgeMS)))
	for _, age := range q.AgeMS {
		b = appendInt(b, age)
	}
	b = appendUint(b, uint64(len(q.Secrets)))
	for _, s := range q.Secrets {
		b = appendSecret(b, s)
	}
	b = appendUint(b, uint64(len(q.Acks)))
	for i := range q.Acks {
		a := &q.Acks[i]
		b = appendUint(b, a.Session)
		b = appendUint(b, a.AckEpoch)
		b = appendUint(b, a.AckSeq)
		b = appendUint(b, a.Seen)
		b = appendBool(b, a.New)
	}
	return b
}

// UnmarshalWire decodes a binary KeepAliveBatchRequest (at most
// MaxBatchBody bytes; each list at most MaxBatchSessions items).
func (q *KeepAliveBatchRequest) UnmarshalWire(b []byte) error {
	r := newWireReader(b, wireBatch, MaxBatchBody, "keepalive batch")
	v := KeepAliveBatchRequest{
		Cell:   r.string(MaxRequestNameLen, "cell"),
		Proxy:  r.string(MaxRequestNameLen, "proxy"),
		WaitMS: r.int("wait_ms"),
		Epoch:  r.uint("epoch"),
	}
	if n := r.count(MaxBatchSessions, 1, "sessions"); n > 0 {
		v.Sessions = make([]uint64, n)
		for i := range v.Sessions {
			v.Sessions[i] = r.uint("sessions")
		}
	}
	if n := r.count(MaxBatchSessions, 1, "age_ms"); n > 0 {
		v.AgeMS = make([]int64, n)
		for i := range v.AgeMS {
			v.AgeMS[i] = r.int("age_ms")
		}
	}
	if n := r.count(MaxBatchSessions, 1, "secrets"); n > 0 {
		v.Secrets = make([]string, n)
		for i := range v.Secrets {
			v.Secrets[i] = r.secret("secrets")
		}
	}
	v.Acks = r.acks()
	if err := r.end(); err != nil {
		return err
	}
	*q = v
	return nil
}

func (r *wireReader) acks() []BatchAck {
	n := r.count(MaxBatchSessions, minAckBytes, "acks")
	if n == 0 {
		return nil
	}
	acks := make([]BatchAck, n)
	for i := range acks {
		acks[i] = BatchAck{
			Session:  r.uint("acks.session"),
			AckEpoch: r.uint("acks.ack_epoch"),
			AckSeq:   r.uint("acks.ack_seq"),
			Seen:     r.uint("acks.seen"),
			New:      r.bool("acks.new"),
		}
	}
	return acks
}

// AppendWire appends the batch reply's binary encoding to b. An error's
// message is cut to MaxWireText bytes.
func (s KeepAliveBatchResponse) AppendWire(b []byte) []byte {
	n := wireHeaderLen + 3*maxVarint
	for i := range s.Sessions {
		n += 3*maxVarint + 1 + eventsSize(s.Sessions[i].Events)
	}
	b = grow(b, n)
	b = wireHeader(b, wireBatchResponse)
	b = appendUint(b, s.Epoch)
	b = appendUint(b, s.Index)
	b = appendUint(b, uint64(len(s.Sessions)))
	for i := range s.Sessions {
		bs := &s.Sessions[i]
		b = appendUint(b, bs.Session)
		b = appendInt(b, bs.LeaseMS)
		b = appendEvents(b, bs.Events)
		b = appendError(b, bs.Error)
	}
	return b
}

// appendError writes a flag byte, then (if e is set) its fields.
func appendError(b []byte, e *Error) []byte {
	if e == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = appendString(b, cutText(string(e.Code), MaxRequestNameLen))
	b = appendString(b, cutText(e.Message, MaxWireText))
	b = appendString(b, cutText(e.Leader, MaxWireText))
	return appendString(b, cutText(e.Cell, MaxWireText))
}

// UnmarshalWire decodes a binary KeepAliveBatchResponse (at most
// MaxReplyBody bytes, MaxBatchSessions sessions).
func (s *KeepAliveBatchResponse) UnmarshalWire(b []byte) error {
	r := newWireReader(b, wireBatchResponse, MaxReplyBody, "keepalive batch reply")
	v := KeepAliveBatchResponse{Epoch: r.uint("epoch"), Index: r.uint("index")}
	if n := r.count(MaxBatchSessions, minBatchSessionBytes, "sessions"); n > 0 {
		v.Sessions = make([]BatchSession, n)
		for i := range v.Sessions {
			v.Sessions[i] = BatchSession{
				Session: r.uint("sessions.session"),
				LeaseMS: r.int("sessions.lease_ms"),
				Events:  r.events("sessions.events"),
				Error:   r.apiError(),
			}
		}
	}
	if err := r.end(); err != nil {
		return err
	}
	*s = v
	return nil
}

func (r *wireReader) apiError() *Error {
	if !r.bool("error") {
		return nil
	}
	return &Error{
		Code:    Code(r.string(MaxRequestNameLen, "error.code")),
		Message: r.string(MaxWireText, "error.message"),
		Leader:  r.string(MaxWireText, "error.leader"),
		Cell:    r.string(MaxWireText, "error.cell"),
	}
}
