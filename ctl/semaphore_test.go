package ctl

import (
	"bytes"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/sdk"
)

// TestLockHolderPermits: --permits picks a semaphore's permit, within
// 1 to api.MaxPermits and never with --shared; without it, a Mutex.
func TestLockHolderPermits(t *testing.T) {
	var c sdk.Client // NewMutex and NewSemaphore send nothing
	cases := []struct {
		permits int
		shared  bool
		sem     bool
		usage   bool
	}{
		{0, false, false, false},
		{0, true, false, false},
		{3, false, true, false},
		{api.MaxPermits, false, true, false},
		{3, true, false, true},
		{-1, false, false, true},
		{api.MaxPermits + 1, false, false, true},
	}
	for _, tc := range cases {
		h, err := lockHolder(&c, "/demo/sem", tc.permits, tc.shared, nil)
		if (err != nil) != tc.usage {
			t.Fatalf("permits %d shared %v: error %v, want usage error %v", tc.permits, tc.shared, err, tc.usage)
		}
		if _, isSem := h.(semaphoreHolder); err == nil && isSem != tc.sem {
			t.Fatalf("permits %d: holder %T", tc.permits, h)
		}
	}
}

// TestPrintQueuePermits: a semaphore's queue starts with its permits in
// use; another lock's does not.
func TestPrintQueuePermits(t *testing.T) {
	q := api.LockQueueResponse{Path: "/demo/sem", Permits: 3, InUse: 2, Entries: []api.LockEntry{
		{Node: "/demo/sem/p-0000000001", Mode: api.LockPermit, Held: true, Token: 7},
		{Node: "/demo/sem/p-0000000002", Mode: api.LockPermit, Held: true, Token: 8},
	}}
	var b bytes.Buffer
	if err := printQueue(&b, q, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !bytes.HasPrefix([]byte(got), []byte("semaphore: 2 of 3 permits in use\n")) {
		t.Fatalf("queue printed %q", got)
	}
	b.Reset()
	q.Permits, q.InUse = 0, 0
	_ = printQueue(&b, q, time.Unix(0, 0))
	if bytes.Contains(b.Bytes(), []byte("semaphore")) {
		t.Fatalf("a lock's queue printed %q", b.String())
	}
}
