package audit

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestTokenIDIsNotTheToken(t *testing.T) {
	for _, tok := range []string{"lkd_abc", "admin-token-of-the-test", strings.Repeat("x", 300)} {
		id := TokenID(tok)
		if len(id) != TokenIDLen || strings.Contains(tok, id) || strings.Contains(id, tok) {
			t.Fatalf("TokenID(%q) = %q", tok, id)
		}
	}
	if TokenID("") != "" {
		t.Fatal("an empty token has an id")
	}
}

// TestRecordForms: a record reaches the log with audit=true and the file
// as one JSON line, with the same fields; empty ones are left out.
func TestRecordForms(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rec     Record
		logHas  []string
		lineHas map[string]any
	}{
		{"a token issued", Record{Time: t0, Action: ActTokenIssue, Step: "put", Result: ResultOK,
			Who:    Actor{Tenant: "bootstrap-admin", TokenID: "0123456789abcdef", Admin: true, ClientAddr: "127.0.0.1:5000"},
			Target: Target{Tenant: "team-a", TokenID: "fedcba9876543210", Index: 7}},
			[]string{"audit=true", "action=token.issue", "result=ok", "target.tenant=team-a", "client_addr=127.0.0.1:5000"},
			map[string]any{"action": "token.issue", "tenant": "bootstrap-admin", "admin": true, "time": "2026-03-01T12:00:00Z"}},
		{"a refusal through a proxy", Record{Time: t0, Action: ActMove, Step: "begin", Result: "forbidden",
			Who: Actor{Tenant: "team-a", ClientAddr: "127.0.0.1:7201", ClaimedClient: "10.0.0.9:4444"}},
			[]string{"result=forbidden", "claimed_client=10.0.0.9:4444", "step=begin"},
			map[string]any{"result": "forbidden", "claimed_client": "10.0.0.9:4444"}},
		{"the lockd itself", Record{Time: t0, Action: ActBackup, Result: ResultOK, Who: Actor{Lockd: 3}, Target: Target{Cell: "demo"}},
			[]string{"lockd=3", "target.cell=demo"},
			map[string]any{"lockd": float64(3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			path := filepath.Join(t.TempDir(), "audit.log")
			l, err := New(slog.New(slog.NewTextHandler(&logged, nil)), Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			l.Record(tc.rec)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l.Record(tc.rec) // after Close: the log only
			for _, want := range tc.logHas {
				if !strings.Contains(logged.String(), want) {
					t.Errorf("log line %q lacks %q", logged.String(), want)
				}
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			if len(lines) != 1 {
				t.Fatalf("file holds %d lines, want 1: %q", len(lines), b)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.lineHas {
				if got[k] != want {
					t.Errorf("line field %s = %v, want %v (%s)", k, got[k], want, lines[0])
				}
			}
			if _, ok := got["session"]; ok {
				t.Errorf("an empty field is written: %s", lines[0])
			}
		})
	}
}

func TestNilLogRecordsNothing(t *testing.T) {
	var l *Log
	l.Record(Record{Action: ActBackup, Result: ResultOK})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRefusalsAreBounded: past RefusalsPerSecond refusals a second are
// counted, the next recorded says how many; changes made are never left out.
func TestRefusalsAreBounded(t *testing.T) {
	var logged bytes.Buffer
	l, err := New(slog.New(slog.NewTextHandler(&logged, nil)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	const extra = 7
	for i := range RefusalsPerSecond + extra {
		l.Record(Record{Time: t0.Add(time.Duration(i) * time.Millisecond), Action: ActAdminRoute, Result: "forbidden"})
	}
	for range 3 {
		l.Record(Record{Time: t0.Add(10 * time.Millisecond), Action: ActBackup, Result: ResultOK})
	}
	l.Record(Record{Time: t0.Add(time.Second), Action: ActAdminRoute, Result: "forbidden"})
	out := logged.String()
	if n := strings.Count(out, "result=forbidden"); n != RefusalsPerSecond+1 {
		t.Fatalf("%d refusals recorded, want %d", n, RefusalsPerSecond+1)
	}
	if n := strings.Count(out, "result=ok"); n != 3 {
		t.Fatalf("%d changes recorded, want 3", n)
	}
	if !strings.Contains(out, "unrecorded_before=7") {
		t.Fatalf("the next refusal does not count those left out:\n%s", out)
	}
}
