package api

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValidatePath(t *testing.T) {
	cases := []struct {
		path string
		ok   bool
	}{
		{"/demo", true},
		{"/demo/locks/w-0000000001", true},
		{"/payments/é", true},
		{"", false},
		{"/", false},
		{"a/b", false},
		{"/demo/", false},
		{"/demo//b", false},
		{"/demo/./b", false},
		{"/demo/../b", false},
		{"/demo/\x00", false},
		{"/demo/\x7f", false},
		{"/demo/\xff", false},
		{"/" + strings.Repeat("a", MaxPathLen-1), true},
		{"/" + strings.Repeat("a", MaxPathLen), false},
		{strings.Repeat("/a", MaxPathDepth), true},
		{strings.Repeat("/a", MaxPathDepth+1), false},
		{"/" + strings.Repeat("x", 4096), false},
	}
	for _, c := range cases {
		err := ValidatePath(c.path)
		if (err == nil) != c.ok {
			t.Errorf("ValidatePath(%.40q) = %v, want ok=%v", c.path, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidPath) {
			t.Errorf("ValidatePath(%.40q) error %v is not invalid_path", c.path, err)
		}
	}
}

func TestPathHelpers(t *testing.T) {
	cases := []struct{ path, prefix, parent, base string }{
		{"/demo", "/demo", "/", "demo"},
		{"/demo/a", "/demo", "/demo", "a"},
		{"/demo/a/b", "/demo", "/demo/a", "b"},
	}
	for _, c := range cases {
		if got := Prefix(c.path); got != c.prefix {
			t.Errorf("Prefix(%s) = %s", c.path, got)
		}
		if got := Parent(c.path); got != c.parent {
			t.Errorf("Parent(%s) = %s", c.path, got)
		}
		if got := Base(c.path); got != c.base {
			t.Errorf("Base(%s) = %s", c.path, got)
		}
		if got := Join(c.parent, c.base); got != c.path {
			t.Errorf("Join(%s, %s) = %s", c.parent, c.base, got)
		}
	}
}

func TestTokenOrder(t *testing.T) {
	// Within an epoch tokens follow the index; any token of a later epoch
	// beats every token of an earlier one.
	if MakeToken(1, 10) >= MakeToken(1, 11) {
		t.Fatal("index order lost")
	}
	if MakeToken(1, 1<<TokenIndexBits-1) >= MakeToken(2, 1) {
		t.Fatal("epoch does not dominate")
	}
	tok := MakeToken(7, 12345)
	if TokenEpoch(tok) != 7 || TokenIndex(tok) != 12345 {
		t.Fatalf("round trip: epoch %d index %d", TokenEpoch(tok), TokenIndex(tok))
	}
}

func TestErrorMatching(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", Errorf(CodeNoNode, "/demo/x does not exist"))
	if !errors.Is(err, ErrNoNode) || errors.Is(err, ErrNodeExists) {
		t.Fatal("errors.Is must match by code")
	}
	if CodeOf(err) != CodeNoNode || CodeOf(errors.New("x")) != "" {
		t.Fatal("CodeOf")
	}
	for _, c := range []Code{CodeNotLeader, CodeSessionExpired, CodeNoSession, CodeNodeExists, CodeNoNode, CodeVersionMismatch,
		CodeNotEmpty, CodeValueTooLarge, CodeInvalidPath, CodeWrongCell, CodeMoved, CodeNotFound, CodeConflict, CodeBadRequest, CodeStaleRequest, CodeUnavailable, CodeUnauthorized} {
		if s := c.HTTPStatus(); s < 400 || s == 500 {
			t.Errorf("%s maps to HTTP %d", c, s)
		}
	}
}
