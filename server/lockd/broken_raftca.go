//go:build lockd_broken_raftca

package lockd

// brokenRaftCA makes Raft run on the API's certificate and CA instead of
// the Raft files, as before the Raft CA: the Raft port then takes any
// client certificate the API's CA signs. A deliberately broken build
// (-tags lockd_broken_raftca) that TestRaftPortTakesOnlyRaftCerts must
// catch. Never set in a normal build.
const brokenRaftCA = true
