//go:build lockd_broken_staleconn

package raftnet

// brokenStaleConn makes a message connection write on a connection its
// peer closed (dragonboat's own transport's behaviour): a deliberately
// broken build (-tags lockd_broken_staleconn) that
// TestFirstMessageAfterPeerRestartArrives must catch. Never set in a
// normal build.
const brokenStaleConn = true
