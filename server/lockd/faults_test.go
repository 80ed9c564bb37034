//go:build lockd_faults

package lockd

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/vfs"
)

// TestFaultFSObeysControl: a file opened through the fault FS syncs
// normally without the control file, fails with "fail", and sleeps with
// "slow D". It runs on a synctest bubble's clock: the rechecks and the
// slow sync pass without waiting.
func TestFaultFSObeysControl(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		ctl := filepath.Join(dir, "fsync-{id}")
		t.Setenv(faultFsyncEnv, ctl)
		var nhc config.NodeHostConfig
		withFaults(&nhc, 3)
		fs := nhc.Expert.FS
		if _, ok := fs.(*vfs.ErrorFS); !ok {
			t.Fatalf("Expert.FS is %T, want dragonboat's error FS", fs)
		}
		f, err := fs.Create(filepath.Join(dir, "log"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		real := filepath.Join(dir, "fsync-3")
		for _, tc := range []struct {
			control string
			wantErr bool
			minDur  time.Duration
		}{
			{"", false, 0},
			{"fail\n", true, 0},
			{"slow 60ms\n", false, 60 * time.Millisecond},
			{"bogus", false, 0},
		} {
			if tc.control == "" {
				_ = os.Remove(real)
			} else if err := os.WriteFile(real, []byte(tc.control), 0o644); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * faultRecheck)
			t0 := time.Now()
			err := f.Sync()
			took := time.Since(t0)
			if tc.wantErr != errors.Is(err, errFaultFsync) || (!tc.wantErr && err != nil) {
				t.Errorf("control %q: Sync = %v", tc.control, err)
			}
			if took < tc.minDur {
				t.Errorf("control %q: Sync took %v, want ≥ %v", tc.control, took, tc.minDur)
			}
			t.Logf("control %q: Sync %v in %v", tc.control, err, took)
		}
		var _ vfs.FS = fs
	})
}
