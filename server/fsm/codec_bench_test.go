package fsm

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/lockservice/lockd/api"
)

// codecBenchCommands are typical entries: a lock node's create (as
// server/cell stamps it: session, secret, request, tenant and quota), a
// put of 100 bytes, and a confirm of 100 sessions.
func codecBenchCommands() map[string]Command {
	quota := &api.Quota{Sessions: 1000, Nodes: 10000, Bytes: 1 << 26, Watches: 1000, WritesPerSec: 2000}
	lock := Command{Op: OpCreate, WriteHeader: api.WriteHeader{Session: 123456, Secret: "0123456789abcdef0123456789abcdef", Request: 42, Ack: 41},
		Path: "/payments/locks/order-17/lock-", Ephemeral: true, Sequential: true, Lock: api.LockExclusive,
		LockDelayMS: 1000, Tenant: "payments", Quota: quota, ParentsFrom: "/payments"}
	put := Command{Op: OpPut, WriteHeader: api.WriteHeader{Session: 123456, Secret: "0123456789abcdef0123456789abcdef", Request: 43, Ack: 42},
		Path: "/payments/config/k-000017", Value: bytes.Repeat([]byte("v"), 100), Tenant: "payments", Quota: quota}
	confirm := Command{Op: OpConfirm, Epoch: 7}
	for i := range 100 {
		confirm.Sessions = append(confirm.Sessions, 100_000+uint64(i)*37)
	}
	return map[string]Command{"lock": lock, "put100": put, "confirm100": confirm}
}

// BenchmarkCodec encodes and decodes each typical entry (and a lock
// create's result) with the JSON codec and the binary one; B/entry is the
// encoded size.
func BenchmarkCodec(b *testing.B) {
	for name, c := range codecBenchCommands() {
		b.Run(name+"/json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e, _ := json.Marshal(&c)
				var d Command
				if err := json.Unmarshal(e, &d); err != nil {
					b.Fatal(err)
				}
			}
			enc, _ := json.Marshal(&c)
			b.ReportMetric(float64(len(enc)), "B/entry") // after the loop: b.Loop resets metrics
		})
		b.Run(name+"/binary", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeCommand(c.Encode()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(c.Encode())), "B/entry")
		})
	}
	r := Result{Index: 1 << 30, Token: 1<<40 + 1<<30, Node: &api.Node{Path: "/payments/locks/order-17/lock-0000000042",
		Version: 1, CreateIndex: 1 << 30, ModifyIndex: 1 << 30, ChildIndex: 1 << 30, Ephemeral: true, Owner: 123456, Lock: api.LockExclusive}}
	b.Run("lockresult/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e, _ := json.Marshal(&r)
			var d Result
			if err := json.Unmarshal(e, &d); err != nil {
				b.Fatal(err)
			}
		}
		enc, _ := json.Marshal(&r)
		b.ReportMetric(float64(len(enc)), "B/entry")
	})
	b.Run("lockresult/binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeResult(r.Encode()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(r.Encode())), "B/entry")
	})
}
