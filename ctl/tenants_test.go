package ctl

import (
	"testing"

	"github.com/lockservice/lockd/api"
)

func TestParseGrant(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // grantList of the result; "" for an error
	}{
		{"/payments=write,lock", "/payments=write,lock"},
		{"/=admin", "/=admin"},
		{"/payments", ""},
		{"=read", ""},
		{"/payments=", ""},
	} {
		g, err := parseGrant(c.in)
		if c.want == "" {
			if api.CodeOf(err) != api.CodeBadRequest {
				t.Errorf("parseGrant(%q) = %v, %v; want bad_request", c.in, g, err)
			}
			continue
		}
		if err != nil || grantList([]api.Grant{g}) != c.want {
			t.Errorf("parseGrant(%q) = %v, %v", c.in, g, err)
		}
	}
}
