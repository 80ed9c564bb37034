package httpapi

// The audit log's records of the admin routes: who (the principal, its
// token's id, the client certificate's subject, the connection's and a
// lockproxy's claimed client address), what (from the route and its
// request), and the result. A record is built from typed fields only:
// never the request's secrets (tokens, session secrets) or a refusal's
// message.

import (
	"encoding/json"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/internal/mutant"
	"github.com/lockservice/lockd/server/audit"
	"github.com/lockservice/lockd/server/dirfsm"
)

// SetAudit makes the server record admin changes, and refusals of admin
// routes, in l (nil: none).
func (s *Server) SetAudit(l *audit.Log) { s.audit = l }

// auditedRoutes are the POST routes recorded, with their action.
var auditedRoutes = map[string]audit.Action{
	api.RouteAdminTenant:        audit.ActTenant,
	api.RouteAdminTenantCommit:  audit.ActTenantCommit,
	api.RouteAdminMigrate:       audit.ActMove,
	api.RouteAdminPrefixOp:      audit.ActMove,
	api.RouteAdminPrefixAssign:  audit.ActPrefixAssign,
	api.RouteAdminRestore:       audit.ActRestore,
	api.RouteAdminCellCreate:    audit.ActCellCreate,
	api.RouteAdminMember:        audit.ActMember,
	api.RouteAdminMemberRecord:  audit.ActMemberRecord,
	api.RouteAdminRegister:      audit.ActLockdRegister,
	api.RouteAdminProxyRegister: audit.ActProxyRegister,
	api.RouteAdminBackup:        audit.ActBackup,
	api.RouteAdminSnapshot:      audit.ActSnapshot,
	api.RouteAdminTransfer:      audit.ActTransfer,
}

// refusalOnly are audited routes recorded only when refused: a move's
// cell-side steps (a copy is a page per request; the directory's steps,
// api.RouteAdminMigrate, record the move).
var refusalOnly = map[string]bool{api.RouteAdminPrefixOp: true}

// maxGrantsRecorded bounds the grants a tenant record lists.
const maxGrantsRecorded = 32

// audited runs h for route and records it when it is one the audit log
// keeps: an admin route, or an admin's delete of another session's node.
func (s *Server) audited(ctx *fasthttp.RequestCtx, route string, p principal, h handler) (any, error) {
	if s.audit == nil {
		return h(s, ctx, p)
	}
	switch route {
	case api.RouteDelete:
		return s.auditedDelete(ctx, p, h)
	case api.RouteTxn:
		return s.auditedTxn(ctx, p, h)
	}
	act, ok := auditedRoutes[route]
	if !ok {
		return h(s, ctx, p)
	}
	v, err := h(s, ctx, p)
	if (err == nil && refusalOnly[route]) || redirected(err) {
		return v, err
	}
	for _, r := range describe(route, act, ctx.PostBody(), v) {
		r.Who, r.Result = s.actor(ctx, p), resultOf(err)
		s.audit.Record(r)
	}
	return v, err
}

// auditUnauthenticated records a request to an audited route refused
// before its principal was known (no token, an unknown one).
func (s *Server) auditUnauthenticated(ctx *fasthttp.RequestCtx, route string, err error) {
	act, ok := auditedRoutes[route]
	if s.audit == nil || !ok {
		return
	}
	s.audit.Record(audit.Record{Action: act, Who: s.actor(ctx, principal{}), Result: resultOf(err)})
}

// auditedDelete runs an admin's delete and records it if it removed
// another session's ephemeral node (its owner read first, locally). Only
// with auth on, and only an admin's: a tenant's deletes (and every delete
// with auth off, where every caller is an admin) cost nothing more.
func (s *Server) auditedDelete(ctx *fasthttp.RequestCtx, p principal, h handler) (any, error) {
	var req api.DeleteRequest
	if !s.auth || !p.admin || json.Unmarshal(ctx.PostBody(), &req) != nil {
		return h(s, ctx, p)
	}
	owner, ok := s.ephemeralOwner(ctx, req.Path)
	v, err := h(s, ctx, p)
	if ok && owner != req.Session && !redirected(err) {
		who := s.actor(ctx, p)
		who.Session = req.Session
		s.audit.Record(audit.Record{Action: audit.ActNodeDelete, Who: who, Result: resultOf(err),
			Target: audit.Target{Path: audit.Clip(req.Path), Owner: owner}})
	}
	return v, err
}

// auditedTxn runs an admin's transaction and records each of its
// deletes of a node another session owns, as auditedDelete does for a
// single delete (a refused transaction deleted nothing: its records say
// the failure's code).
func (s *Server) auditedTxn(ctx *fasthttp.RequestCtx, p principal, h handler) (any, error) {
	var req api.TxnRequest
	if !s.auth || !p.admin || json.Unmarshal(ctx.PostBody(), &req) != nil {
		return h(s, ctx, p)
	}
	var targets []audit.Target
	for _, op := range req.Then {
		if op.Op != api.TxnDelete {
			continue
		}
		if owner, ok := s.ephemeralOwner(ctx, op.Path); ok && owner != req.Session {
			targets = append(targets, audit.Target{Path: audit.Clip(op.Path), Owner: owner})
		}
	}
	v, err := h(s, ctx, p)
	if len(targets) == 0 || redirected(err) {
		return v, err
	}
	result := resultOf(err)
	if r, ok := v.(api.TxnResponse); ok && !r.Succeeded && r.Failed != nil {
		result = string(r.Failed.Code)
	}
	who := s.actor(ctx, p)
	who.Session = req.Session
	for _, t := range targets {
		s.audit.Record(audit.Record{Action: audit.ActNodeDelete, Who: who, Result: result, Target: t})
	}
	return v, err
}

// ephemeralOwner is the owner of the ephemeral node at path on the cell
// this lockd hosts for it, if any (no directory read, no wait).
func (s *Server) ephemeralOwner(ctx *fasthttp.RequestCtx, path string) (uint64, bool) {
	name := string(ctx.Request.Header.Peek(api.HeaderCell))
	if name == "" {
		info, err := s.host.Directory().CellFor(path)
		if err != nil {
			return 0, false
		}
		name = info.Name
	}
	c, ok := s.host.Cell(name)
	if !ok || api.ValidatePath(path) != nil {
		return 0, false
	}
	return c.EphemeralOwner(path)
}

// actor is who sent ctx's request, as p authenticated it.
func (s *Server) actor(ctx *fasthttp.RequestCtx, p principal) audit.Actor {
	a := audit.Actor{Tenant: p.name, TokenID: p.tokenID, Admin: p.admin && s.auth,
		ClientAddr: audit.Clip(ctx.RemoteAddr().String())}
	if mutant.On(mutant.AuditToken) {
		a.TokenID, _ = api.BearerToken(string(ctx.Request.Header.Peek(api.HeaderAuth)))
	}
	if claimed := ctx.Request.Header.Peek(api.HeaderClientAddr); len(claimed) > 0 {
		a.ClaimedClient = string(claimed[:min(len(claimed), api.MaxClientAddrHeader)])
	}
	if st := ctx.TLSConnectionState(); st != nil && len(st.PeerCertificates) > 0 {
		a.CertSubject = audit.Clip(st.PeerCertificates[0].Subject.String())
	}
	if p.name != "" || p.admin || mutant.On(mutant.AuditReadsStream) {
		// An unauthenticated caller's body is never probed: whatever
		// session it names is its own claim.
		a.Session = sessionOf(ctx)
	}
	return a
}

// sessionOf is the session ctx's body names, if the body was read: a
// body that still streams (a request refused before its caller was
// known, past api.MaxRequestBody) is never read here, as PostBody would
// read it whole and without a bound (0: none). An unauthenticated
// caller's body is not probed at all (actor).
func sessionOf(ctx *fasthttp.RequestCtx) uint64 {
	if ctx.Request.IsBodyStream() && !mutant.On(mutant.AuditReadsStream) {
		return 0
	}
	var probe struct {
		Session uint64 `json:"session"`
	}
	if json.Unmarshal(ctx.PostBody(), &probe) != nil {
		return 0
	}
	return probe.Session
}

// redirected reports whether err sends the client to another replica
// (not_leader, wrong_cell): nothing was done here, and the replica that
// serves the request records it.
func redirected(err error) bool {
	switch api.CodeOf(err) {
	case api.CodeNotLeader, api.CodeWrongCell:
		return true
	}
	return false
}

// resultOf is a record's result for a handler's error: ok, or its code.
func resultOf(err error) string {
	if err == nil {
		return audit.ResultOK
	}
	return string(api.CodeOf(err))
}

// describe is what a request to route did (act, refined by the request
// body and the reply v): usually one record, two for a tenant made with
// a token. A body that does not decode leaves the target empty.
func describe(route string, act audit.Action, body []byte, v any) []audit.Record {
	r := audit.Record{Action: act}
	t := &r.Target
	switch route {
	case api.RouteAdminTenant:
		return describeTenant(body, v)
	case api.RouteAdminTenantCommit:
		var req dirfsm.TenantChange
		if json.Unmarshal(body, &req) == nil {
			r.Step, t.Tenant = audit.Clip(req.Action), audit.Clip(req.Tenant.Name)
			if req.TokenDigest != "" {
				t.TokenID = req.TokenDigest[:min(len(req.TokenDigest), audit.TokenIDLen)]
			}
		}
	case api.RouteAdminMigrate:
		var req api.MigrateRequest
		if json.Unmarshal(body, &req) == nil {
			r.Step, t.Prefix, t.To = audit.Clip(req.Action), audit.Clip(req.Prefix), audit.Clip(req.To)
		}
	case api.RouteAdminPrefixOp:
		var req api.PrefixOpRequest
		if json.Unmarshal(body, &req) == nil {
			r.Step, t.Prefix, t.Cell, t.To = audit.Clip(req.Op), audit.Clip(req.Prefix), audit.Clip(req.Cell), audit.Clip(req.To)
		}
	case api.RouteAdminPrefixAssign:
		var req api.AssignPrefixRequest
		if json.Unmarshal(body, &req) == nil {
			t.Prefix, t.Cell = audit.Clip(req.Prefix), audit.Clip(req.Cell)
		}
	case api.RouteAdminRestore:
		var req api.RestoreCellRequest
		if json.Unmarshal(body, &req) == nil {
			t.Cell, t.Index = audit.Clip(req.Cell), req.BackupIndex
		}
	case api.RouteAdminCellCreate:
		var req api.CreateCellRequest
		if json.Unmarshal(body, &req) == nil {
			t.Cell = audit.Clip(req.Name)
		}
	case api.RouteAdminMember, api.RouteAdminMemberRecord:
		var req api.MemberRequest
		if json.Unmarshal(body, &req) == nil {
			r.Step, t.Cell, t.Lockd = audit.Clip(req.Action), audit.Clip(req.Cell), req.Lockd
		}
	case api.RouteAdminRegister:
		var req api.RegisterLockdRequest
		if json.Unmarshal(body, &req) == nil {
			t.Lockd, t.To = req.ID, audit.Clip(req.APIAddr)
		}
	case api.RouteAdminProxyRegister:
		var req api.ProxyInfo
		if json.Unmarshal(body, &req) == nil {
			t.Name, t.To = audit.Clip(req.Name), audit.Clip(req.APIAddr)
		}
	case api.RouteAdminBackup, api.RouteAdminSnapshot:
		var req api.BackupRequest
		if json.Unmarshal(body, &req) == nil {
			t.Cell = audit.Clip(req.Cell)
		}
		if b, ok := v.(api.BackupResponse); ok {
			t.Index, t.Location = b.Index, audit.Clip(b.Location)
		}
	case api.RouteAdminTransfer:
		var req api.TransferRequest
		if json.Unmarshal(body, &req) == nil {
			t.Cell, t.Lockd = audit.Clip(req.Cell), req.To
		}
	}
	if res, ok := v.(dirfsm.Result); ok {
		t.Index = res.Index
	}
	return []audit.Record{r}
}

// describeTenant is a tenant change's records: the change itself (put or
// delete), a revoke as token.revoke, and a token made with a put as a
// second record naming the token's id (never the token, which v holds).
func describeTenant(body []byte, v any) []audit.Record {
	var req api.TenantRequest
	if json.Unmarshal(body, &req) != nil {
		return []audit.Record{{Action: audit.ActTenant}}
	}
	t := audit.Target{Tenant: audit.Clip(req.Tenant.Name), Grants: grantsOf(req.Tenant.Grants)}
	resp, _ := v.(api.TenantResponse)
	t.Index = resp.Index
	switch req.Action {
	case api.TenantRevoke:
		t.Grants = nil
		return []audit.Record{{Action: audit.ActTokenRevoke, Step: req.Action, Target: t}}
	case api.TenantPut:
		out := []audit.Record{{Action: audit.ActTenant, Step: req.Action, Target: t}}
		if req.NewToken {
			issued := audit.Target{Tenant: t.Tenant, TokenID: audit.TokenID(resp.Token), Index: t.Index}
			out = append(out, audit.Record{Action: audit.ActTokenIssue, Step: req.Action, Target: issued})
		}
		return out
	}
	t.Grants = nil
	return []audit.Record{{Action: audit.ActTenant, Step: audit.Clip(req.Action), Target: t}}
}

// grantsOf is grants as PREFIX=ROLE+ROLE, at most maxGrantsRecorded.
func grantsOf(grants []api.Grant) []string {
	var out []string
	for _, g := range grants[:min(len(grants), maxGrantsRecorded)] {
		roles := make([]string, 0, len(g.Roles))
		for _, r := range g.Roles {
			roles = append(roles, string(r))
		}
		out = append(out, audit.Clip(g.Prefix+"="+strings.Join(roles, "+")))
	}
	return out
}
