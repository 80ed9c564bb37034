package etcdgw

import (
	"github.com/lockservice/lockd/api"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Events: a change of the ring as an etcd event. A put carries the node
// as written (create and mod revision, version, value, the lease of an
// ephemeral node); a delete carries the key and the delete's revision
// as mod_revision, as etcd's do. prev_kv: a delete's is the node as it
// was (the ring keeps it); a put's is the key's previous change while
// that is in the ring (the watch reads the ring from its Floor when it
// starts), else it is left out (docs/etcd.md, "Watch").

// eventMaker turns one watch's changes into events.
type eventMaker struct {
	g  *Gateway
	wt *watch
	// prev is each key's last put seen (prev_kv watches only), at most
	// MaxPrevKVKeys keys.
	prev map[string]api.Node
}

func newEventMaker(g *Gateway, wt *watch) *eventMaker {
	m := &eventMaker{g: g, wt: wt}
	if wt.prevKV {
		m.prev = make(map[string]api.Node)
	}
	return m
}

// events are b's events for the watch: its span, no containers, from
// its start index on, through its filters.
func (m *eventMaker) events(b feedBatch) []*mvccpb.Event {
	var out []*mvccpb.Event
	for i := range b.changes {
		c := &b.changes[i]
		if c.Node.Container || !inSpan(c.Node.Path, m.wt.span.Start, m.wt.span.End) {
			continue
		}
		prev, hasPrev := m.remember(c)
		if c.Index < m.wt.start {
			continue // history: remembered only
		}
		if ev := m.event(c, prev, hasPrev); ev != nil {
			out = append(out, ev)
		}
	}
	return out
}

// event is one change's event (nil if a filter drops it).
func (m *eventMaker) event(c *api.Change, prev api.Node, hasPrev bool) *mvccpb.Event {
	switch c.Kind {
	case api.ChangePut:
		if m.wt.noPut {
			return nil
		}
		ev := &mvccpb.Event{Type: mvccpb.PUT, Kv: m.kv(c.Node, c.Index)}
		if m.wt.prevKV && hasPrev && prev.Version+1 == c.Node.Version {
			ev.PrevKv = m.kv(prev, prev.ModifyIndex)
		}
		return ev
	case api.ChangeDelete:
		if m.wt.noDelete {
			return nil
		}
		ev := &mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{
			Key:         m.g.keys.key(c.Node.Path, m.wt.span.Rel),
			ModRevision: rev(m.wt.epoch, c.Index),
		}}
		if m.wt.prevKV {
			ev.PrevKv = m.kv(c.Node, c.Node.ModifyIndex)
		}
		return ev
	}
	return nil
}

// remember records c for prev_kv and answers the key's previous put.
func (m *eventMaker) remember(c *api.Change) (api.Node, bool) {
	if m.prev == nil {
		return api.Node{}, false
	}
	prev, ok := m.prev[c.Node.Path]
	switch {
	case c.Kind == api.ChangeDelete:
		delete(m.prev, c.Node.Path)
	case ok || len(m.prev) < MaxPrevKVKeys:
		m.prev[c.Node.Path] = c.Node
	}
	return prev, ok
}

// kv is n as an etcd key-value, modified at mod (0: n's ModifyIndex).
func (m *eventMaker) kv(n api.Node, mod uint64) *mvccpb.KeyValue {
	if mod == 0 {
		mod = n.ModifyIndex
	}
	kv := &mvccpb.KeyValue{
		Key:            m.g.keys.key(n.Path, m.wt.span.Rel),
		CreateRevision: rev(m.wt.epoch, n.CreateIndex),
		ModRevision:    rev(m.wt.epoch, mod),
		Version:        int64(n.Version),
		Value:          n.Value,
	}
	if n.Ephemeral {
		kv.Lease = m.g.leases.leaseOf(m.wt.span.Prefix.Cell, n.Owner)
	}
	return kv
}

// eventBytes estimates ev's size on the wire (for MaxWatchResponseBytes).
func eventBytes(ev *mvccpb.Event) int {
	const overhead = 64 // revisions, version, lease, framing
	n := overhead + len(ev.Kv.Key) + len(ev.Kv.Value)
	if ev.PrevKv != nil {
		n += overhead + len(ev.PrevKv.Key) + len(ev.PrevKv.Value)
	}
	return n
}

// chunks splits events into answers of at most MaxWatchResponseBytes
// (one event alone may exceed it: it goes alone).
func chunks(events []*mvccpb.Event) [][]*mvccpb.Event {
	var out [][]*mvccpb.Event
	start, size := 0, 0
	for i, ev := range events {
		n := eventBytes(ev)
		if i > start && size+n > MaxWatchResponseBytes {
			out = append(out, events[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(events) {
		out = append(out, events[start:])
	}
	return out
}
