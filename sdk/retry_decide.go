package sdk

import (
	"slices"

	"github.com/lockservice/lockd/api"
)

// outcome is what one attempt of a call came to, as decide sees it.
type outcome struct {
	status    int      // HTTP status of the reply; 0 when there was none
	code      api.Code // error code of a non-2xx reply
	hint      string   // leader named by a not_leader reply
	addr      string   // the endpoint tried
	transport bool     // the exchange failed without a reply
	notSent   bool     // ... and the request certainly never left (dial failure, no free connection, stale)
	stale     bool     // ... because its pooled connection was closed by the server (errStaleConn)
	ctxDone   bool     // the call's context ended (during a failed exchange)
	closed    bool     // the client (or its transport) is closing
	// noCluster: every endpoint has refused connections for the call's
	// noClusterAfter (nothing listens there).
	noCluster bool

	unreachable  []string // the endpoints the call failed to reach and that have not answered since, after this attempt (call.unreachable)
	retryUnsure  bool     // the call may be resent after an unsure failure
	redirects    int      // not_leader hints followed without backoff so far, not counting this one
	staleResends int      // resends at once after stale connections so far, not counting this one
	unavailable  int      // consecutive unavailable replies from addr, this one included
	notApplied   bool     // the unavailable reply says the request had no effect (api.Error.NotApplied)
	elected      bool     // the not_leader reply's leader was elected while it waited (api.Error.Elected)
	// notAppliedRun: consecutive not_applied replies from addr, this one included.
	notAppliedRun int
	// heldOut: the unavailable reply came only at the end of the attempt
	// (the replica held it the whole time without committing it).
	heldOut bool
}

// action is what the retry loop does after an attempt.
type action uint8

const (
	actDone      action = iota // 2xx: decode the reply and return
	actFail                    // return the reply's error: a definite answer, or not retryable
	actUnknown                 // return outcome-unknown: the call may have applied and may not be resent
	actRefresh                 // wrong_cell or moved: reload the directory, then return the error
	actCanceled                // the context ended: give up
	actClosed                  // the client is closing: ErrClosed
	actNoCluster               // nothing listens at any endpoint: ErrNoCluster
	actRetry                   // send again at once (to the hinted leader)
	actBackoff                 // wait a jittered backoff, then send again
)

// decision is decide's verdict: the action, plus what the loop first
// records about the endpoint.
type decision struct {
	act    action
	forget bool // forget addr as leader and rotate the next pick past it
	follow bool // record the not_leader hint as the cell's leader
}

// notAppliedRotate is how many consecutive not_applied refusals from one
// replica make the loop look at another (a leader taking a prefix up is
// found again through not_leader).
const notAppliedRotate = 4

// retryable are the only codes a call is resent after. Every other code —
// including ones this SDK does not know — is a final answer.
var retryable = map[api.Code]bool{api.CodeNotLeader: true, api.CodeUnavailable: true}

// decide is the retry policy: pure, a function of one attempt's outcome
// (observe puts the loop's state in it: redirects, unavailable count,
// unreachable endpoints). do acts on its decision (retryLoop.act).
func decide(o outcome) decision {
	switch {
	case o.transport && o.ctxDone:
		return decision{act: actCanceled}
	case o.transport && o.closed:
		return decision{act: actClosed}
	case o.transport && o.stale && o.staleResends < maxStaleResends:
		// The endpoint answers; only a pooled connection to it was gone:
		// send again at once on another (or a fresh) one.
		return decision{act: actRetry}
	case o.transport && o.notSent && o.noCluster:
		return decision{act: actNoCluster}
	case o.transport && !o.notSent && !o.retryUnsure:
		return decision{act: actUnknown, forget: true}
	case o.transport:
		return decision{act: actBackoff, forget: true}
	case o.status >= 200 && o.status < 300:
		return decision{act: actDone}
	case o.code == api.CodeWrongCell, o.code == api.CodeMoved:
		return decision{act: actRefresh}
	case !retryable[o.code]:
		return decision{act: actFail}
	case o.code == api.CodeNotLeader: // never applied: always safe to resend
		// A hint naming the replica this call just failed to reach is a
		// dead leader others have not yet replaced: back off instead;
		// unless it was elected since (a process restarted there).
		fresh := o.hint != "" && o.hint != o.addr && (o.elected || !slices.Contains(o.unreachable, o.hint))
		switch {
		case !fresh:
			return decision{act: actBackoff, forget: true}
		case o.redirects < maxFreeRedirects:
			return decision{act: actRetry, follow: true}
		default:
			return decision{act: actBackoff, follow: true}
		}
	default: // unavailable
		switch {
		case !o.retryUnsure && !o.notApplied:
			return decision{act: actUnknown}
		case o.unavailable >= unavailableRotate, o.notAppliedRun >= notAppliedRotate, o.heldOut:
			// A replica held out for a whole attempt is not asked again
			// first: a leader frozen under a live HTTP layer (a failed
			// fsync) held a resend as long again, while a new leader was
			// elected in 1 s (a fault run's put took 10.1 s).
			return decision{act: actBackoff, forget: true}
		default:
			return decision{act: actBackoff}
		}
	}
}
