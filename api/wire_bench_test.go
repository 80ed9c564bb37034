package api

import (
	"encoding/json"
	"fmt"
	"testing"
)

// benchBatch is a lockproxy's batch of n sessions, one in ten with an
// acknowledgement, and the leader's reply with events for one in a hundred.
func benchBatch(n int) (KeepAliveBatchRequest, KeepAliveBatchResponse) {
	q := KeepAliveBatchRequest{Cell: "payments", Proxy: "proxy-a#3", WaitMS: 1000, Epoch: 7}
	var s KeepAliveBatchResponse
	s.Epoch, s.Index = 7, 123456
	for i := range n {
		id := uint64(1_000_000 + 37*i)
		q.Sessions = append(q.Sessions, id)
		q.AgeMS = append(q.AgeMS, int64(i%1000))
		q.Secrets = append(q.Secrets, fmt.Sprintf("%032x", id*0x9e3779b97f4a7c15))
		if i%10 == 0 {
			q.Acks = append(q.Acks, BatchAck{Session: id, AckEpoch: 7, AckSeq: uint64(i), Seen: uint64(i + 1)})
		}
		if i%100 == 0 {
			s.Sessions = append(s.Sessions, BatchSession{Session: id, LeaseMS: 12000, Events: sampleEvents(2, false)})
		}
	}
	return q, s
}

// BenchmarkWire: encode + decode of each KeepAlive message, JSON against
// binary; "bytes" is the encoded size.
func BenchmarkWire(b *testing.B) {
	batch, batchReply := benchBatch(1000)
	cases := []struct {
		name string
		msg  wireMessage
	}{
		{"keepalive_request", &KeepAliveRequest{Cell: "demo", Session: 1234567, Secret: hexSecret, WaitMS: 4000, AckSeq: 17, AckEpoch: 3}},
		{"session_reply_0ev", &SessionResponse{Session: 1234567, LeaseMS: 12000, Epoch: 3, Index: 987654}},
		{"session_reply_5ev", &SessionResponse{Session: 1234567, LeaseMS: 12000, Epoch: 3, Index: 987654, Events: sampleEvents(5, false)}},
		{"batch_1000", &batch},
		{"batch_reply_1000", &batchReply},
	}
	for _, c := range cases {
		b.Run(c.name+"/json", func(b *testing.B) {
			var n int
			b.ReportAllocs()
			for b.Loop() {
				into := fresh(c.msg) // decoded afresh, as a server does
				j, err := json.Marshal(c.msg)
				if err != nil {
					b.Fatal(err)
				}
				if err := json.Unmarshal(j, into); err != nil {
					b.Fatal(err)
				}
				n = len(j)
			}
			b.ReportMetric(float64(n), "bytes")
		})
		b.Run(c.name+"/binary", func(b *testing.B) {
			var n int
			b.ReportAllocs()
			for b.Loop() {
				into := fresh(c.msg)
				w := c.msg.AppendWire(nil)
				if err := into.UnmarshalWire(w); err != nil {
					b.Fatal(err)
				}
				n = len(w)
			}
			b.ReportMetric(float64(n), "bytes")
		})
	}
}
