package docs

import (
	"reflect"
	"testing"
)

// TestMatch: expected lines are whole output lines in order, spaces
// trimmed and collapsed, "..." matching any text.
func TestMatch(t *testing.T) {
	out := "version: 1\n  leading /demo/e as \"vm:8080\" (token 1099511627842)\nPROXY    ENDPOINT   ZONE\n\tlast\n"
	cases := []struct {
		name   string
		expect []string
		ok     bool
	}{
		{"none", nil, true},
		{"one exact", []string{"version: 1"}, true},
		{"trimmed", []string{"last"}, true},
		{"spaces collapsed", []string{"PROXY ENDPOINT ZONE"}, true},
		{"wildcards", []string{`leading /demo/e as "...:8080" (token ...)`}, true},
		{"in order", []string{"version: 1", "last"}, true},
		{"out of order", []string{"last", "version: 1"}, false},
		{"a prefix is not the line", []string{"version:"}, false},
		{"wildcard at the end", []string{"version: ..."}, true},
		{"regexp characters are literal", []string{"version. 1"}, false},
		{"missing", []string{"version: 2"}, false},
		{"one line matches once", []string{"last", "last"}, false},
		{"only wildcard", []string{"..."}, true},
	}
	for _, c := range cases {
		if err := Match(out, c.expect); (err == nil) != c.ok {
			t.Errorf("%s: Match(%q) = %v, want ok=%v", c.name, c.expect, err, c.ok)
		}
	}
}

// TestSplitExit: "[exit N]" is the expected status, not output.
func TestSplitExit(t *testing.T) {
	st, rest := splitExit([]string{"a", "[exit 3]", "b"})
	if st != 3 || !reflect.DeepEqual(rest, []string{"a", "b"}) {
		t.Errorf("splitExit = %d %q", st, rest)
	}
	if st, _ := splitExit([]string{"[exit x]"}); st != 0 {
		t.Errorf("[exit x]: status %d", st)
	}
}

// TestRewrite: the dev cluster's default addresses move to the test's
// ports; others stay.
func TestRewrite(t *testing.T) {
	m := Ports{API: 27001, Raft: 27101, Proxy: 27201, Etcd: 22379, Lockds: 6, Proxies: 2}.Map()
	for in, want := range map[string]string{
		"127.0.0.1:7001,127.0.0.1:7006":       "127.0.0.1:27001,127.0.0.1:27006",
		"localhost:7202 127.0.0.1:7101":       "localhost:27202 127.0.0.1:27101",
		"127.0.0.1:2379,127.0.0.1:2479":       "127.0.0.1:22379,127.0.0.1:22479",
		"127.0.0.1:7007 10.0.1.1:7000":        "127.0.0.1:7007 10.0.1.1:7000",
		"http://127.0.0.1:7001/status":        "http://127.0.0.1:27001/status",
		"127.0.0.1:70010 127.0.0.1:2579 text": "127.0.0.1:70010 127.0.0.1:2579 text",
	} {
		if got := Rewrite(in, m); got != want {
			t.Errorf("Rewrite(%q) = %q, want %q", in, got, want)
		}
	}
}
