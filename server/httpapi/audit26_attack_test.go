package httpapi

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/audit"
)

// countingReader is an endless body that counts what was read of it.
type countingReader struct{ read int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	r.read += int64(len(p))
	return len(p), nil
}

// attackBodyLen is the streamed body the attacker claims: 64 MiB, far
// over api.MaxRequestBody.
const attackBodyLen = 64 << 20

// TestAuditUnauthenticatedReadsNoBody: a request with no token (or an
// unknown one) to an audited admin route, whose body streams (over
// api.MaxRequestBody, as fasthttp's StreamRequestBody hands it), is
// recorded without reading its body: nothing is read before the caller
// is known. Before the fix the audit's session probe (actor) called
// PostBody, which reads a streamed body whole, without a bound: an
// unauthenticated client could make a lockd hold any body it sent.
func TestAuditUnauthenticatedReadsNoBody(t *testing.T) {
	s, buf := auditedTestServer(t)
	for _, auth := range []string{"", "lkd_unknown"} {
		buf.Reset()
		body := &countingReader{}
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI(api.RouteAdminTenant)
		if auth != "" {
			ctx.Request.Header.Set(api.HeaderAuth, "Bearer "+auth)
		}
		ctx.Request.SetBodyStream(io.LimitReader(body, attackBodyLen), attackBodyLen)
		s.Handler(&ctx)
		if body.read > api.MaxRequestBody {
			t.Errorf("auth %q: %d bytes of an unauthenticated body read", auth, body.read)
		}
		if !strings.Contains(buf.String(), "result=unauthorized") {
			t.Errorf("auth %q: no refusal record: %q", auth, buf.String())
		}
	}
}

// TestAuditStrangerClaimsNoSession: the session an unauthenticated
// request's body names (a small body, read ahead with its header) is not
// recorded: it is the stranger's claim.
func TestAuditStrangerClaimsNoSession(t *testing.T) {
	s, buf := auditedTestServer(t)
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Request.SetRequestURI(api.RouteAdminTenant)
	ctx.Request.SetBodyString(`{"session":424242}`)
	s.Handler(&ctx)
	if !strings.Contains(buf.String(), "result=unauthorized") || strings.Contains(buf.String(), "424242") {
		t.Fatalf("audit record %q: want a refusal naming no session", buf.String())
	}
}

// TestAuditClaimedClientInjection: a forged Lockd-Client-Addr (a tenant
// calling a lockd directly claims to be a proxy's client) cannot hide
// the real peer address, cannot add a record or a field (quotes, JSON,
// newlines are escaped), and is kept to api.MaxClientAddrHeader bytes.
func TestAuditClaimedClientInjection(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	l, err := audit.New(slog.New(slog.NewJSONHandler(&buf, nil)), audit.Options{Path: dir + "/audit.jsonl"})
	if err != nil {
		t.Fatal(err)
	}
	s := wireTestServer(t)
	s.SetAudit(l)
	for _, claim := range []string{
		`1.2.3.4","tenant":"admin","result":"ok`,
		"1.2.3.4\\n{\"action\":\"tenant\"}",
		strings.Repeat("A", 100000),
		"\x00\xff\xfe<script>",
	} {
		buf.Reset()
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI(api.RouteAdminCellCreate)
		ctx.Request.Header.Set(api.HeaderClientAddr, claim)
		ctx.Request.SetBody([]byte(`{"name":"x"}`))
		s.Handler(&ctx)
		out := buf.String()
		if strings.Count(out, "\n") != 1 {
			t.Fatalf("claim %.40q: want one log line, got %q", claim, out)
		}
		if len(out) > 4096 {
			t.Errorf("claim %.40q: record of %d bytes", claim, len(out))
		}
		if !strings.Contains(out, `"client_addr":"0.0.0.0:0"`) || strings.Contains(out, `"tenant":"admin"`) || !strings.Contains(out, `"result":"unauthorized"`) {
			t.Errorf("claim %.40q: record %q", claim, out)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
