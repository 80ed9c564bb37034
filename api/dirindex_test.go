package api

import (
	"errors"
	"testing"
)

// TestParseDirectoryIndex: none is 0; a malformed or over-long value is a
// bad_request.
func TestParseDirectoryIndex(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		code Code
	}{
		{"", 0, ""},
		{"0", 0, ""},
		{"42", 42, ""},
		{"18446744073709551615", 18446744073709551615, ""},
		{"18446744073709551616", 0, CodeBadRequest},  // over a uint64
		{"000000000000000000042", 0, CodeBadRequest}, // over 20 digits
		{"-1", 0, CodeBadRequest},
		{"12a", 0, CodeBadRequest},
		{" 12", 0, CodeBadRequest},
	}
	for _, tc := range cases {
		got, err := ParseDirectoryIndex([]byte(tc.in))
		var ae *Error
		switch {
		case tc.code == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %d, %v; want %d", tc.in, got, err, tc.want)
		case tc.code != "" && (!errors.As(err, &ae) || ae.Code != tc.code || got != 0):
			t.Errorf("%q: %d, %v; want %s", tc.in, got, err, tc.code)
		}
	}
}
