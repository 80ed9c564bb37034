package docs

import (
	"fmt"
	"regexp"
	"strings"
)

// wildcard in an expected line matches any text.
const wildcard = "..."

// normalize trims a line and makes every run of spaces and tabs one space
// (tables print padded columns).
func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// lineRe compiles an expected line: the whole (normalized) output line,
// "..." matching any text.
func lineRe(expect string) *regexp.Regexp {
	parts := strings.Split(normalize(expect), wildcard)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// Match checks that every expected line equals a line of out, in order
// (normalize; "..." matches any text). It returns nil, or an error naming
// the first expected line not found after the ones before it matched.
func Match(out string, expect []string) error {
	lines := strings.Split(out, "\n")
	at := 0
	for i, e := range expect {
		re := lineRe(e)
		found := false
		for ; at < len(lines); at++ {
			if re.MatchString(normalize(lines[at])) {
				found, at = true, at+1
				break
			}
		}
		if !found {
			return fmt.Errorf("expected output line %d of %d not found (in order) in stdout: %q", i+1, len(expect), e)
		}
	}
	return nil
}

// Matched reports whether Match finds every expected line.
func Matched(out string, expect []string) bool { return Match(out, expect) == nil }
