package audit

// A record's two forms: slog attributes, and a JSON line for the file.
// Both carry the same fields (documented in docs/design/operations.md,
// "Audit log"); empty ones are left out.

import (
	"encoding/json"
	"log/slog"
	"time"
)

// line is a record as the file holds it, one JSON object a line.
type line struct {
	Time          string  `json:"time"`
	Action        Action  `json:"action"`
	Step          string  `json:"step,omitempty"`
	Result        string  `json:"result"`
	Unrecorded    int     `json:"unrecorded_before,omitempty"`
	Tenant        string  `json:"tenant,omitempty"`
	TokenID       string  `json:"token_id,omitempty"`
	Admin         bool    `json:"admin,omitempty"`
	CertSubject   string  `json:"cert_subject,omitempty"`
	Session       uint64  `json:"session,omitempty"`
	ClientAddr    string  `json:"client_addr,omitempty"`
	ClaimedClient string  `json:"claimed_client,omitempty"`
	Lockd         uint64  `json:"lockd,omitempty"`
	Target        *target `json:"target,omitempty"`
}

type target struct {
	Tenant   string   `json:"tenant,omitempty"`
	Grants   []string `json:"grants,omitempty"`
	TokenID  string   `json:"token_id,omitempty"`
	Prefix   string   `json:"prefix,omitempty"`
	Cell     string   `json:"cell,omitempty"`
	To       string   `json:"to,omitempty"`
	Lockd    uint64   `json:"lockd,omitempty"`
	Path     string   `json:"path,omitempty"`
	Owner    uint64   `json:"owner,omitempty"`
	Index    uint64   `json:"index,omitempty"`
	Location string   `json:"location,omitempty"`
	Name     string   `json:"name,omitempty"`
}

func lineOf(r Record) line {
	w := r.Who
	l := line{Time: r.Time.UTC().Format(time.RFC3339Nano), Action: r.Action, Step: r.Step, Result: r.Result, Unrecorded: r.Unrecorded,
		Tenant: w.Tenant, TokenID: w.TokenID, Admin: w.Admin, CertSubject: w.CertSubject, Session: w.Session,
		ClientAddr: w.ClientAddr, ClaimedClient: w.ClaimedClient, Lockd: w.Lockd}
	t := target(r.Target)
	if !t.empty() {
		l.Target = &t
	}
	return l
}

func (t target) empty() bool {
	return t.Tenant == "" && len(t.Grants) == 0 && t.TokenID == "" && t.Prefix == "" && t.Cell == "" && t.To == "" &&
		t.Lockd == 0 && t.Path == "" && t.Owner == 0 && t.Index == 0 && t.Location == "" && t.Name == ""
}

// encodeLine is r as a line of the file, newline included.
func encodeLine(r Record) ([]byte, error) {
	b, err := json.Marshal(lineOf(r))
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// attrList collects slog attributes, leaving out empty strings and zero
// numbers.
type attrList []slog.Attr

func (a *attrList) str(key, v string) {
	if v != "" {
		*a = append(*a, slog.String(key, v))
	}
}

func (a *attrList) num(key string, v uint64) {
	if v != 0 {
		*a = append(*a, slog.Uint64(key, v))
	}
}

// attrs is r as slog attributes: the line's fields, the target's grouped
// under "target".
func attrs(r Record) []slog.Attr {
	l := lineOf(r)
	out := attrList{slog.String("action", string(l.Action)), slog.String("result", l.Result)}
	out.str("step", l.Step)
	out.str("tenant", l.Tenant)
	out.str("token_id", l.TokenID)
	if l.Admin {
		out = append(out, slog.Bool("admin", true))
	}
	out.str("cert_subject", l.CertSubject)
	out.num("session", l.Session)
	out.str("client_addr", l.ClientAddr)
	out.str("claimed_client", l.ClaimedClient)
	out.num("lockd", l.Lockd)
	if l.Unrecorded > 0 {
		out = append(out, slog.Int("unrecorded_before", l.Unrecorded))
	}
	if l.Target != nil {
		out = append(out, slog.Any("target", l.Target.attrs()))
	}
	return out
}

// attrs is t as a slog group's attributes.
func (t *target) attrs() slog.Value {
	var out attrList
	out.str("tenant", t.Tenant)
	if len(t.Grants) > 0 {
		out = append(out, slog.Any("grants", t.Grants))
	}
	out.str("token_id", t.TokenID)
	out.str("prefix", t.Prefix)
	out.str("cell", t.Cell)
	out.str("to", t.To)
	out.num("lockd", t.Lockd)
	out.str("path", t.Path)
	out.num("owner", t.Owner)
	out.num("index", t.Index)
	out.str("location", t.Location)
	out.str("name", t.Name)
	return slog.GroupValue(out...)
}
