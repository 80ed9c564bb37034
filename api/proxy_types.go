package api

// The proxy's batched KeepAlives and its status.

// KeepAliveBatchRequest renews many sessions of one cell in one call (a
// lockproxy's, once a second, for all its clients). Sessions and AgeMS are
// parallel: AgeMS[i] is how long before the batch was sent its client's
// last KeepAlive reached the proxy, and the leader extends the lease to
// now − age + lease (never shortening it): a client that stopped sending
// loses its lease as it would talking to the leader directly. The leader
// holds the call until a session in it has an event the proxy has not
// seen, or WaitMS passes (at most MaxBatchWait), then confirms its
// leadership with one ReadIndex and answers.
type KeepAliveBatchRequest struct {
	Cell string `json:"cell"`
	// Proxy names the proxy (required): the leader tells it, in its next
	// batch, of events for any session it renewed last, so a batch
	// between its once-a-second full renewals may carry only the
	// sessions with something to acknowledge.
	Proxy  string `json:"proxy"`
	WaitMS int64  `json:"wait_ms,omitempty"`
	// Epoch is the leader epoch the proxy knows: the Seen values of Acks
	// belong to it (ignored under another).
	Epoch    uint64   `json:"epoch,omitempty"`
	Sessions []uint64 `json:"sessions"`
	AgeMS    []int64  `json:"age_ms"`
	// Secrets[i] is Sessions[i]'s secret as its client sent it; a
	// session whose secret does not match is not renewed (unauthorized).
	Secrets []string `json:"secrets,omitempty"`
	// Acks are the sessions that acknowledge events, hold events the
	// proxy has seen and its client has not acknowledged, or are new to
	// the proxy: the rest acknowledge nothing new.
	Acks []BatchAck `json:"acks,omitempty"`
}

// BatchAck is one session's acknowledgement in a batch: AckSeq under
// AckEpoch as its client sent it (the leader drops those events), and Seen,
// the highest seq the proxy already holds (the leader does not end the
// wait for those). New asks for the session's lease length in the reply.
type BatchAck struct {
	Session  uint64 `json:"session"`
	AckEpoch uint64 `json:"ack_epoch,omitempty"`
	AckSeq   uint64 `json:"ack_seq,omitempty"`
	Seen     uint64 `json:"seen,omitempty"`
	New      bool   `json:"new,omitempty"`
}

// KeepAliveBatchResponse answers a batch. Every session of the request not
// listed in Sessions was renewed and has nothing new to report; Sessions
// may also list other sessions the proxy renewed last that got events.
type KeepAliveBatchResponse struct {
	Epoch    uint64         `json:"epoch"`
	Index    uint64         `json:"index"`
	Sessions []BatchSession `json:"sessions,omitempty"`
}

// BatchSession is one session's part of a batch reply: its lease length
// and every unacknowledged event (when it has events beyond Seen or was
// New), or the error that stopped its renewal (session_expired,
// no_session, unavailable while its expiry is in flight).
type BatchSession struct {
	Session uint64  `json:"session"`
	LeaseMS int64   `json:"lease_ms,omitempty"`
	Events  []Event `json:"events,omitempty"`
	Error   *Error  `json:"error,omitempty"`
}

// ProxyInfo is a lockproxy registered in the directory.
type ProxyInfo struct {
	Name    string `json:"name"`
	APIAddr string `json:"api_addr"`
	Zone    string `json:"zone,omitempty"`
}

// ProxyStatus is a lockproxy's GET /v1/status.
type ProxyStatus struct {
	Proxy   ProxyInfo `json:"proxy"`
	Version string    `json:"version,omitempty"`
	// EtcdURL is where the proxy's etcd gateway serves clients
	// ("https://host:port"; empty without one): other gateways list it in
	// MemberList and send it requests about the leases it granted.
	EtcdURL string `json:"etcd_url,omitempty"`
	// Clients are open client connections; Sessions the sessions it renews.
	Clients  int               `json:"clients"`
	Sessions int               `json:"sessions"`
	Cells    []ProxyCellStatus `json:"cells,omitempty"`
}

// ProxyCellStatus is what a lockproxy knows of one cell.
type ProxyCellStatus struct {
	Cell     string `json:"cell"`
	Epoch    uint64 `json:"epoch"`
	Sessions int    `json:"sessions"`
	// LastBatchAgeMS is how long ago its last batch was confirmed.
	LastBatchAgeMS int64  `json:"last_batch_age_ms"`
	Batches        uint64 `json:"batches"`
}
