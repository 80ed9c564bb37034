package api

// Watches and the events they fire.

// WatchKind says what a one-shot watch fires on.
type WatchKind string

const (
	// WatchData fires when the node's value changes, it is deleted, or (if it
	// did not exist) it is created.
	WatchData WatchKind = "data"
	// WatchChildren fires when a child is created or deleted, or the node is deleted.
	WatchChildren WatchKind = "children"
)

// WatchSpec re-arms a watch after a reconnect or fail-over: Since is the
// last index the client saw; if the node changed after it, the watch fires
// at once.
type WatchSpec struct {
	Path  string    `json:"path"`
	Kind  WatchKind `json:"kind"`
	Since uint64    `json:"since"`
}

// WatchRequest registers watches for Session on the cell serving their paths.
type WatchRequest struct {
	Cell    string      `json:"cell"`
	Session uint64      `json:"session"`
	Secret  string      `json:"secret,omitempty"`
	Watches []WatchSpec `json:"watches"`
}

// WatchResponse answers watch registration.
type WatchResponse struct {
	Index uint64 `json:"index"`
}

// EventType is what happened to a watched node.
type EventType string

const (
	EventCreated         EventType = "created"
	EventDataChanged     EventType = "data_changed"
	EventDeleted         EventType = "deleted"
	EventChildrenChanged EventType = "children_changed"
	// EventLockDelayEnded: the lock directory's lock-delay ended (its
	// data did not change); its waiters re-check.
	EventLockDelayEnded EventType = "lock_delay_ended"
	// EventResync says events were dropped (the session's queue overflowed or
	// the leader could not tell): re-read and re-arm every watch.
	EventResync EventType = "resync"
	// EventInvalidate tells a session's client to drop path from its
	// cache, and acknowledge (the leader holds the write until it does).
	EventInvalidate EventType = "invalidate"
)

// Event is a one-shot watch firing, delivered on the session.
type Event struct {
	Type  EventType `json:"type"`
	Path  string    `json:"path"`
	Kind  WatchKind `json:"kind"`
	Index uint64    `json:"index"` // the index of the change
	// Seq numbers the session's events within one leadership (it grows
	// per session under one leader epoch). The event is re-sent in every
	// KeepAlive reply until a KeepAlive acknowledges it (AckSeq).
	Seq uint64 `json:"seq"`
}
