package cell

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lni/dragonboat/v4/raftio"

	"github.com/lockservice/lockd/api"
)

// During a fail-over a replica holds a request (when the client allows it)
// until it learns of a leader the client can use, instead of sending it
// back to poll with backoff through the election.
func TestWaitUsableHoldsUntilALeaderIsKnown(t *testing.T) {
	for _, tc := range []struct {
		name        string
		leaderNow   uint64 // the leader this replica knows when the request arrives
		unreachable string // the client's dead address
		held        bool
	}{
		{"no leader known: held", 0, "", true},
		{"the leader the client cannot reach: held", 2, "b:1", true},
		{"the leader among the replicas the client cannot reach: held", 2, "d:1,b:1", true},
		{"a leader the client has not tried: answered at once", 2, "", false},
		{"another leader than the unreachable one: answered at once", 2, "c:1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newTestReplica(t, 1, nil)
				r.c.SetPlacement(Placement{APIAddrs: map[uint64]string{1: "a:1", 2: "b:1", 3: "c:1"}})
				r.c.LeaderUpdated(raftio.LeaderInfo{ShardID: 1, ReplicaID: 1, LeaderID: tc.leaderNow, Term: 4})
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- r.c.WaitUsable(ctx, tc.unreachable) }()
				synctest.Wait()
				if !tc.held {
					select {
					case err := <-done:
						if !errors.Is(err, api.ErrNotLeader) || err.(*api.Error).Leader != "b:1" {
							t.Fatalf("answered %v, want not_leader naming b:1", err)
						}
					default:
						t.Fatal("held a request it could answer usefully")
					}
					return
				}
				select {
				case err := <-done:
					t.Fatalf("answered %v at once, want it held", err)
				default:
				}
				// Replica 3 wins the election: the held request learns of it.
				r.c.LeaderUpdated(raftio.LeaderInfo{ShardID: 1, ReplicaID: 1, LeaderID: 3, Term: 5})
				synctest.Wait()
				select {
				case err := <-done:
					if !errors.Is(err, api.ErrNotLeader) || err.(*api.Error).Leader != "c:1" {
						t.Fatalf("answered %v, want not_leader naming the new leader c:1", err)
					}
				default:
					t.Fatal("still held after the leader changed")
				}
			})
		})
	}
}

// The hold ends with the client's budget: the answer is then what Ready says.
func TestWaitUsableEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTestReplica(t, 1, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := r.c.WaitUsable(ctx, ""); !errors.Is(err, api.ErrNotLeader) {
			t.Fatalf("err %v, want not_leader", err)
		}
	})
}

// A leader the client could not reach that wins a newer term while the
// request is held (its process restarted at the same address) is named at
// once, with Elected set, so that the client tries it again; the same
// leader and term reported again (a follower's flicker) keeps the hold.
func TestWaitUsableNamesAReelectedLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTestReplica(t, 1, nil)
		r.c.SetPlacement(Placement{APIAddrs: map[uint64]string{1: "a:1", 2: "b:1", 3: "c:1"}})
		r.c.LeaderUpdated(raftio.LeaderInfo{ShardID: 1, ReplicaID: 1, LeaderID: 2, Term: 4})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- r.c.WaitUsable(ctx, "b:1") }()
		synctest.Wait()
		for _, info := range []raftio.LeaderInfo{{LeaderID: 0, Term: 4}, {LeaderID: 2, Term: 4}} {
			info.ShardID, info.ReplicaID = 1, 1
			r.c.LeaderUpdated(info)
			synctest.Wait()
			select {
			case err := <-done:
				t.Fatalf("answered %v after %+v, want it held", err, info)
			default:
			}
		}
		r.c.LeaderUpdated(raftio.LeaderInfo{ShardID: 1, ReplicaID: 1, LeaderID: 0, Term: 5})
		r.c.LeaderUpdated(raftio.LeaderInfo{ShardID: 1, ReplicaID: 1, LeaderID: 2, Term: 5})
		synctest.Wait()
		select {
		case err := <-done:
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != api.CodeNotLeader || ae.Leader != "b:1" || !ae.Elected {
				t.Fatalf("answered %v, want not_leader naming b:1 as elected", err)
			}
		default:
			t.Fatal("still held after the unreachable leader was re-elected at a newer term")
		}
	})
}
