package etcdgw

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestWatchSurvivesAnotherTenantsBigIndex (found by the attack review,
// session 34): one tenant's session holding more than
// api.MaxChangesPerRead ephemeral nodes under a prefix ends (its nodes
// all go at one index). The prefix's shared feed reader once could not
// read that index in one read and ended every subscriber of the prefix,
// so another tenant's watch of its own keys was canceled (compacted).
// A cell never cuts an index between two reads (fsm ReadChanges; mutant
// lockd_broken_changes_split), so the reader reads it whole.
func TestWatchSurvivesAnotherTenantsBigIndex(t *testing.T) {
	b := newWFBackend()
	_, c := wfGateway(t, b, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wc := c.Watch(ctx, "/demo/alice/", clientv3.WithPrefix())
	b.put("/demo/alice/k", "v1")
	if r := wfRecv(t, wc); r.Canceled || len(r.Events) != 1 {
		t.Fatalf("first event: %+v", r)
	}
	b.mu.Lock()
	b.index++
	for i := range api.MaxChangesPerRead + 1 {
		b.ring = append(b.ring, api.Change{Index: b.index, Kind: api.ChangeDelete,
			Node: api.Node{Path: fmt.Sprintf("/demo/mallory/e%05d", i), Ephemeral: true, Owner: 9}})
	}
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
	b.put("/demo/alice/k", "v2")
	r := wfRecv(t, wc)
	if r.Canceled || r.CompactRevision != 0 || len(r.Events) != 1 {
		t.Fatalf("alice's watch after mallory's session ended: canceled=%v compact=%d events=%d", r.Canceled, r.CompactRevision, len(r.Events))
	}
}
