// Package raftnet is lockd's Raft transport: dragonboat's TCP wire
// format (the same magic number, 18-byte header, CRC and snapshot
// poison handshake, so a lockd with it and one with dragonboat's own
// transport talk to each other during a rolling upgrade), with one
// difference in the sender.
//
// dragonboat's sender keeps one outgoing connection per peer and learns
// that the peer restarted only when it next writes on it: that write is
// lost (the bytes go into a socket the peer has closed) and the peer's
// circuit breaker then drops messages to it for 0.5–1 s. A follower
// writes to another follower only in an election, so its first vote after
// a peer's restart was lost, and with a bare majority left the election
// took another timeout: fail-overs of 3.1–3.9 s against 1–2 s otherwise
// (docs/design/soft-state-and-failover.md, Timing).
//
// Here every outgoing message connection also reads: the receiver never
// writes on it, so a read returns only when the peer closed it (its
// process ended: FIN or RST) or the network said it is gone. The
// connection is then marked dead, and the next send dials afresh before it
// writes, so the message reaches the restarted peer. A peer that vanishes
// without closing (power loss, a cut network) is found as before: by a
// failed write, TCP keepalive or the dial. A peer that ended the
// connection with a TLS alert refused this node's certificate (TLS 1.3
// lets the dial succeed before the server checks it): it is not dialed
// again, every later send fails with ErrRefused, and dragonboat's
// circuit breaker paces the retries.
package raftnet
