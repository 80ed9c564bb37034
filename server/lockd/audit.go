package lockd

import (
	"github.com/lockservice/lockd/api"
	"github.com/lockservice/lockd/server/audit"
)

// auditOptions is the audit file's configuration (--audit-file,
// --audit-max-mb, --audit-keep).
func (c Config) auditOptions() audit.Options {
	return audit.Options{Path: c.AuditFile, MaxBytes: int64(c.AuditMaxMB) << 20, Keep: c.AuditKeep}
}

// openAudit opens the audit log: the process's log, and the file if set.
func (p *Process) openAudit() error {
	l, err := audit.New(p.log, p.cfg.auditOptions())
	if err != nil {
		return err
	}
	p.audit = l
	return nil
}

// closeAudit closes the audit file (Close, once the API has stopped).
func (p *Process) closeAudit() {
	if err := p.audit.Close(); err != nil {
		p.log.Warn("closing the audit file", "err", err)
	}
}

// auditSelf records a change this lockd made on its own (a periodic
// backup): the actor is the lockd, the result err's code or ok.
func (p *Process) auditSelf(act audit.Action, err error, t audit.Target) {
	result := audit.ResultOK
	if err != nil {
		result = string(api.CodeOf(err))
	}
	p.audit.Record(audit.Record{Action: act, Who: audit.Actor{Lockd: p.cfg.ReplicaID}, Target: t, Result: result})
}
