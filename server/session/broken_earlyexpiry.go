//go:build lockd_broken_earlyexpiry

package session

// brokenEarlyExpiry makes the leader expire a session half its lease
// early: its client, whose local lease runs the whole lease from
// its last confirmed KeepAlive's send, still believes it holds. A
// deliberately broken build (-tags lockd_broken_earlyexpiry) that the
// fault suite's checker m3 (no client told its session is safe past its
// expiry) must catch. Never set in a normal build.
const brokenEarlyExpiry = true
