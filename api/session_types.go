package api

// Sessions: open, KeepAlive and close.

// OpenSessionRequest opens a session on Cell.
type OpenSessionRequest struct {
	Cell string `json:"cell"`
	// LeaseMS asks for a lease length; 0 takes the cell's default. The cell
	// clamps it to [MinLease, MaxLease].
	LeaseMS int64 `json:"lease_ms,omitempty"`
	// Nonce names one logical open (at most MaxNonceLen bytes; empty: no
	// dedupe). A retry with the same nonce returns the session the first
	// attempt opened, while the cell remembers it (its last MaxOpenNonces
	// opens) and the session lives; the client draws a fresh random nonce
	// for every new open.
	Nonce string `json:"nonce,omitempty"`
}

// SessionResponse answers OpenSession and KeepAlive.
type SessionResponse struct {
	Session uint64 `json:"session"`
	// Secret, in an open's reply only: every later request naming the
	// session carries it (KeepAlive, close, writes, watches). Session ids
	// are Raft indices anyone can guess; the secret is 128 random bits.
	Secret  string `json:"secret,omitempty"`
	LeaseMS int64  `json:"lease_ms"`
	// Epoch is the cell's leader epoch: it changes on every leader change,
	// which is how a client learns of a fail-over.
	Epoch uint64 `json:"epoch"`
	// Index is the cell's applied index when the reply was made.
	Index uint64 `json:"index"`
	// Events are the session's events not yet acknowledged, oldest first.
	// A reply may repeat events an earlier reply carried (that reply may
	// have been lost); the client processes each Seq once.
	Events []Event `json:"events,omitempty"`
	// LeaseAgeMS: the lease this reply confirms was renewed this long
	// before the request reached the server. 0 from a lockd (it renews on
	// receipt); a lockproxy renews its clients' leases in batches and
	// answers with the age of the last confirmed one. The client counts
	// its lease from its send time less this.
	LeaseAgeMS int64 `json:"lease_age_ms,omitempty"`
	// KeepAliveMS and GraceMS, in an open's reply: the cell's KeepAlive
	// interval and the grace a client in jeopardy should keep trying for
	// (0: lease/3 and the client's default, scaled to the lease).
	KeepAliveMS int64 `json:"keepalive_ms,omitempty"`
	GraceMS     int64 `json:"grace_ms,omitempty"`
	// Proxy names the lockproxy instance that answered ("" from a lockd):
	// a client whose replies start naming another one flushes its cache
	// and re-arms its watches there (the old proxy held them).
	Proxy string `json:"proxy,omitempty"`
	// CacheMS, through a proxy: how long after its send the client may
	// serve values the proxy made cacheable (what was left of the proxy's
	// own cache window on the cell when the request arrived; 0: none).
	CacheMS int64 `json:"cache_ms,omitempty"`
	// ProxyEvents are the proxy's own events for the session: the firing
	// of watches the proxy holds for it and invalidations of values it
	// served cacheable, numbered (Seq) per session by the proxy instance
	// and re-sent until a KeepAlive acknowledges them (ProxyAck).
	ProxyEvents []Event `json:"proxy_events,omitempty"`
}

// KeepAliveRequest renews a session's lease and long-polls for its events:
// the leader extends the lease when it receives the request, drops the
// events AckSeq acknowledges, then holds the request until an event is
// pending or WaitMS passes (at most lease/2 and MaxKeepAliveWait). A newer
// KeepAlive of the session releases an older one still held.
type KeepAliveRequest struct {
	Cell    string `json:"cell"`
	Session uint64 `json:"session"`
	Secret  string `json:"secret,omitempty"`
	WaitMS  int64  `json:"wait_ms,omitempty"`
	// AckSeq is the highest event Seq the client has processed, under
	// leader epoch AckEpoch (seqs restart with each leadership). An ack
	// for another epoch than the leader's is ignored.
	AckSeq   uint64 `json:"ack_seq"`
	AckEpoch uint64 `json:"ack_epoch,omitempty"`
	// Proxy and ProxyAck acknowledge the ProxyEvents of that proxy
	// instance up to ProxyAck (a lockd ignores them).
	Proxy    string `json:"proxy,omitempty"`
	ProxyAck uint64 `json:"proxy_ack,omitempty"`
}

// CloseSessionRequest ends a session and frees everything it held.
type CloseSessionRequest struct {
	Cell    string `json:"cell"`
	Session uint64 `json:"session"`
	Secret  string `json:"secret,omitempty"`
}
