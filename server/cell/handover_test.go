package cell

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/session"
)

// handOverScript plays a hand-over's effects: which proposals fail, when
// the leadership moves; it logs every step.
type handOverScript struct {
	recordErr, transferErr error
	cancelErrs             []error // one per cancel proposal, then nil
	movesAfter             int     // moved() true from this call on (0: never)
	calls                  int
	steps                  []string
}

func (h *handOverScript) play() handOverSteps {
	return handOverSteps{
		record: func(_ context.Context, _ uint64, s []session.Silence) error {
			h.steps = append(h.steps, "record")
			return h.recordErr
		},
		cancel: func(context.Context, uint64) error {
			var err error
			if len(h.cancelErrs) > 0 {
				err, h.cancelErrs = h.cancelErrs[0], h.cancelErrs[1:]
			}
			if err != nil {
				h.steps = append(h.steps, "cancel-failed")
			} else {
				h.steps = append(h.steps, "cancel")
			}
			return err
		},
		transfer: func() error { h.steps = append(h.steps, "transfer"); return h.transferErr },
		moved: func() bool {
			h.calls++
			return h.movesAfter > 0 && h.calls >= h.movesAfter
		},
		thaw:  func(uint64) { h.steps = append(h.steps, "thaw") },
		sleep: func(time.Duration) {},
		log:   slog.New(slog.DiscardHandler),
	}
}

// TestHandOverCancelsBeforeThaw: a hand-over records before it asks for
// the transfer (and asks again at half its wait); if the leadership
// moves, nothing is cancelled or thawed
// (the manager stopped); if anything failed or it did not move, the
// manager is thawed only right after a cancel committed, never after a
// refused one (a later leadership: this one's manager stopped).
func TestHandOverCancelsBeforeThaw(t *testing.T) {
	unavailable := api.Errorf(api.CodeUnavailable, "timeout")
	refused := &Refusal{api.Errorf(api.CodeNotLeader, "hand_over from leader epoch 1, now 2")}
	for _, tc := range []struct {
		name     string
		script   handOverScript
		stopping bool // a stopping lockd: no cancel
		ok       bool
		frozen   bool
		want     string
	}{
		{name: "moves", script: handOverScript{movesAfter: 3}, ok: true, want: "record transfer"},
		{name: "never moves", want: "record transfer transfer cancel thaw"},
		{name: "record fails", script: handOverScript{recordErr: unavailable}, want: "record cancel thaw"},
		{name: "transfer fails", script: handOverScript{transferErr: errors.New("busy")}, want: "record transfer cancel thaw"},
		{name: "cancel retried", script: handOverScript{cancelErrs: []error{unavailable, unavailable}}, want: "record transfer transfer cancel-failed cancel-failed cancel thaw"},
		{name: "cancel refused", script: handOverScript{cancelErrs: []error{refused}}, want: "record transfer transfer cancel-failed"},
		{name: "cancel never commits", script: handOverScript{cancelErrs: repeatErr(unavailable, handOverCancelAttempts)}, frozen: true,
			want: "record transfer transfer" + strings.Repeat(" cancel-failed", handOverCancelAttempts) + " transfer"},
		{name: "stopping", stopping: true, frozen: true, want: "record transfer transfer"},
		{name: "stopping, moves", stopping: true, script: handOverScript{movesAfter: 5}, ok: true, want: "record transfer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.script
			steps := s.play()
			if tc.stopping {
				steps.cancel = nil
			}
			frozen, err := runHandOver(steps, 1, []session.Silence{{Session: 7, SilentMS: 9000}}, 10*handOverPoll)
			if (err == nil) != tc.ok || frozen != tc.frozen {
				t.Fatalf("err %v, frozen %v; want ok=%v, frozen %v", err, frozen, tc.ok, tc.frozen)
			}
			if got := strings.Join(s.steps, " "); got != tc.want {
				t.Fatalf("steps %q, want %q", got, tc.want)
			}
		})
	}
}

func repeatErr(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}
