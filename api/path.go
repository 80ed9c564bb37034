package api

import (
	"strings"
	"unicode/utf8"
)

// ValidatePath checks the path rules: absolute, at least one segment, no empty,
// "." or ".." segments, no trailing slash, valid UTF-8 without control
// characters, at most MaxPathLen bytes and MaxPathDepth segments.
func ValidatePath(p string) error {
	switch {
	case p == "":
		return Errorf(CodeInvalidPath, "empty path")
	case len(p) > MaxPathLen:
		return Errorf(CodeInvalidPath, "path is %d bytes, limit %d", len(p), MaxPathLen)
	case p[0] != '/':
		return Errorf(CodeInvalidPath, "path %q is not absolute", p)
	case p == "/":
		return Errorf(CodeInvalidPath, "the root is not a node")
	case strings.HasSuffix(p, "/"):
		return Errorf(CodeInvalidPath, "path %q ends in /", p)
	case !utf8.ValidString(p):
		return Errorf(CodeInvalidPath, "path is not valid UTF-8")
	}
	depth := 0
	for _, seg := range strings.Split(p[1:], "/") {
		depth++
		switch seg {
		case "":
			return Errorf(CodeInvalidPath, "path %q has an empty segment", p)
		case ".", "..":
			return Errorf(CodeInvalidPath, "path %q has a %q segment", p, seg)
		}
		for _, r := range seg {
			if r < 0x20 || r == 0x7f {
				return Errorf(CodeInvalidPath, "path has a control character")
			}
		}
	}
	if depth > MaxPathDepth {
		return Errorf(CodeInvalidPath, "path has %d segments, limit %d", depth, MaxPathDepth)
	}
	return nil
}

// Prefix returns the top-level prefix of a valid path: "/payments" for
// "/payments/locks/a". The prefix decides which cell serves the path.
func Prefix(p string) string {
	if i := strings.IndexByte(p[1:], '/'); i >= 0 {
		return p[:i+1]
	}
	return p
}

// Parent returns the parent of a valid path; "/" for a top-level prefix.
func Parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/"
	}
	return p[:i]
}

// Base returns the last segment of a valid path.
func Base(p string) string {
	return p[strings.LastIndexByte(p, '/')+1:]
}

// Join appends a child name to a parent path.
func Join(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}
