package sdk

import "testing"

// Through proxies a not_leader hint is followed only to one of them: a
// lockd's address relayed by a proxy would take the client around the
// proxies. A direct client follows any hint (its directory may not list
// a restored cell's replicas yet).
func TestRedirectFollowsOnlyEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name       string
		proxied    bool
		from, hint string
		wantLeader string
	}{
		{"proxied: hint among the proxies", true, "a:1", "b:1", "b:1"},
		{"proxied: hint outside them (a lockd behind the proxies)", true, "a:1", "lockd:7000", ""},
		{"proxied: no hint", true, "a:1", "", ""},
		{"direct: hint among the replicas", false, "a:1", "b:1", "b:1"},
		{"direct: hint outside them (a replica the directory does not list yet)", false, "a:1", "lockd:7000", "lockd:7000"},
		{"direct: hint names the replier", false, "a:1", "a:1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := &cellState{endpoints: []string{"a:1", "b:1"}, leader: "a:1", proxied: tc.proxied}
			cs.redirect(tc.from, tc.hint)
			if cs.leader != tc.wantLeader {
				t.Fatalf("leader %q after a hint %q from %s, want %q", cs.leader, tc.hint, tc.from, tc.wantLeader)
			}
		})
	}
}
