package chaos

import "testing"

// hostileKinds are the attack kinds every run with the hostile tenant
// must have tried.
var hostileKinds = []string{
	"cred-none", "cred-empty", "cred-malformed", "cred-wrong", "cred-revoked",
	"reader-write", "reader-admin", "reader-outside-read", "reader-directory", "reader-make-parents",
	"random-path", "cache-block", "cache-missing", "watch-flood", "keepalive-made-up",
}

// checkHostileRan fails t if the hostile tenant did not try every kind.
func checkHostileRan(t *testing.T, rep *Report) {
	t.Helper()
	for _, k := range hostileKinds {
		if rep.Hostile[k].Attempts == 0 {
			t.Errorf("the hostile tenant never tried %s (counts %v)", k, rep.Hostile)
		}
	}
}

func TestMetricValue(t *testing.T) {
	b := []byte("# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 42\ngo_goroutines_other 7\nprocess_resident_memory_bytes 1.048576e+06\n")
	if got := metricValue(b, "go_goroutines"); got != 42 {
		t.Errorf("go_goroutines = %v", got)
	}
	if got := metricValue(b, "process_resident_memory_bytes"); got != 1<<20 {
		t.Errorf("rss = %v", got)
	}
	if got := metricValue(b, "absent"); got != 0 {
		t.Errorf("absent = %v", got)
	}
}
