package lockd

import (
	"fmt"
	"time"

	"github.com/lockservice/lockd/internal/timerslack"
)

// TimerSlackFor is the OS timer slack the config asks lockd serve to run
// every thread with (internal/timerslack says why), 0 to keep the OS's
// own (TimerSlackUS -1). Pure.
func TimerSlackFor(c Config) (time.Duration, error) {
	d, err := timerslack.For(c.TimerSlackUS)
	if err != nil {
		return 0, fmt.Errorf("config: %w", err)
	}
	return d, nil
}
