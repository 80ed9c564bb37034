package cell

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A proposal bound while a leadership runs outlives its end until its fate
// is decided: a later term's leader_start applied here ends it at once
// (errLeadershipLost), or the grace does. An older or equal term's
// leader_start decides nothing; a proposal made while not leading is not
// bound; a re-election at a new term ends the old term's; a caller's own
// end keeps its cause.
func TestProposalBoundToItsLeadership(t *testing.T) {
	const never = time.Hour
	var b leaderBound
	b.lead(5, never)
	handOff, stop1 := b.bind(context.Background())
	defer stop1()
	b.lose(never)
	b.settled(5) // a late copy of its own leader_start: decides nothing
	running(t, "ended, its fate undecided", handOff)
	b.settled(6)
	ended(t, "a later leader_start applied", handOff, errLeadershipLost)

	follower, stop2 := b.bind(context.Background())
	defer stop2()
	b.lead(7, never)
	cutOff, stop3 := b.bind(context.Background())
	defer stop3()
	b.lose(10 * time.Millisecond) // cut off: no leader_start will apply here
	ended(t, "the grace ran out", cutOff, errLeadershipLost)
	b.settled(7)
	running(t, "made while not leading", follower)

	b.lead(8, never)
	reelected, stop4 := b.bind(context.Background())
	defer stop4()
	b.lead(9, never) // no loss reported between
	b.settled(9)
	ended(t, "re-elected at a new term", reelected, errLeadershipLost)

	parent, cancel := context.WithCancelCause(context.Background())
	own, stop5 := b.bind(parent)
	defer stop5()
	boom := errors.New("the caller gave up")
	cancel(boom)
	ended(t, "the caller's end", own, boom)
	b.lose(never)
	b.settled(10)
	if len(b.ended) != 0 || b.cur != nil {
		t.Fatalf("after every leadership was decided: %d ended kept, running %v", len(b.ended), b.cur)
	}
}

// The ended leaderships awaiting their fate are bounded: past
// maxEndedLeaderships the oldest ends at once.
func TestEndedLeadershipsBounded(t *testing.T) {
	var b leaderBound
	b.lead(1, time.Hour)
	first, stop := b.bind(context.Background())
	defer stop()
	for term := uint64(2); term <= maxEndedLeaderships+1; term++ {
		b.lead(term, time.Hour)
	}
	running(t, "the bound reached", first)
	b.lead(maxEndedLeaderships+2, time.Hour)
	ended(t, "past the bound", first, errLeadershipLost)
	if len(b.ended) != maxEndedLeaderships {
		t.Fatalf("%d ended kept, want %d", len(b.ended), maxEndedLeaderships)
	}
}

// ended waits (a bounded while: the cancellation runs on a goroutine of
// its own) for ctx to end with cause want.
func ended(t *testing.T, what string, ctx context.Context, want error) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still running", what)
	}
	if !errors.Is(context.Cause(ctx), want) {
		t.Fatalf("%s: ended with %v, want %v", what, context.Cause(ctx), want)
	}
}

// running checks that ctx has not ended (given a moment to).
func running(t *testing.T, what string, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatalf("%s: ended with %v", what, context.Cause(ctx))
	case <-time.After(20 * time.Millisecond):
	}
}

// A leadership the listener reports ended only after a later term's
// leader_start applied here (its events come on a queue of their own) is
// decided already: its proposals end at once, not after the grace.
func TestLateReportedEndIsDecided(t *testing.T) {
	var b leaderBound
	b.lead(3, time.Hour)
	p, stop := b.bind(context.Background())
	defer stop()
	b.settled(4)
	running(t, "still leading as the listener sees it", p)
	b.lose(time.Hour)
	ended(t, "reported ended after term 4 applied", p, errLeadershipLost)
}
