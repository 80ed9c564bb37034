//go:build !lockd_broken_staleconn

package raftnet

const brokenStaleConn = false
