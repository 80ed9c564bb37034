package sdk

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockservice/lockd/api"
)

// TestMoveStepErrorSaysHowToGoOn: a failed step of a migration in flight
// names the commands that resume or abort it, and keeps the cause's code.
func TestMoveStepErrorSaysHowToGoOn(t *testing.T) {
	cause := api.Errorf(api.CodeWrongCell, `no cell named "cell3" in the directory`)
	for _, tc := range []struct {
		committed bool
		want      []string
		not       string
	}{
		{false, []string{"lockctl migrate /bulk --to cell3", "lockctl migrate /bulk --abort", "no cell named"}, ""},
		{true, []string{"lockctl migrate /bulk --to cell3", "committed"}, "--abort"},
	} {
		err := moveFailed(cause, "/bulk", "cell3", tc.committed)
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("committed=%v: %q does not say %q", tc.committed, err, w)
			}
		}
		if tc.not != "" && strings.Contains(err.Error(), tc.not) {
			t.Errorf("committed=%v: %q offers %q", tc.committed, err, tc.not)
		}
		if api.CodeOf(err) != api.CodeWrongCell || !errors.Is(err, cause) {
			t.Errorf("committed=%v: the cause's code is lost: %v", tc.committed, api.CodeOf(err))
		}
	}
	if moveFailed(nil, "/bulk", "cell3", false) != nil {
		t.Error("no error wrapped into one")
	}
}
