package fsm

// Transcript commands on nodes and locks (transcript_test.go).

import (
	"strconv"
	"strings"

	"github.com/lockservice/lockd/api"
)

// header is the write header of a command naming session s=, if any.
func (w *world) header(c *ddCase, tc *tcell) api.WriteHeader {
	if _, ok := c.Arg("s"); !ok {
		return api.WriteHeader{}
	}
	return api.WriteHeader{Session: w.session(c, tc, "s")}
}

// cmdCreate creates path= (ephemeral, of session s=; sequential;
// parents: make the missing parents; value=; tenant=; delay=, a
// lock-delay, which only a lock node may have).
func (w *world) cmdCreate(c *ddCase) string {
	tc := w.cell(c)
	v, _ := c.Arg("value")
	cmd := Command{Op: OpCreate, Path: w.str(c, "path"), Value: []byte(v), Ephemeral: w.flag(c, "ephemeral"),
		Sequential: w.flag(c, "sequential"), MakeParents: w.flag(c, "parents"), WriteHeader: w.header(c, tc),
		LockDelayMS: int64(w.num(c, "delay", 0))}
	w.tenant(c, &cmd)
	return w.apply(tc, cmd, func(r Result) string { return "created " + r.Node.Path })
}

// cmdPut writes value= at path= (version=: only at that version;
// parents, tenant= and its quota as for create).
func (w *world) cmdPut(c *ddCase) string {
	tc := w.cell(c)
	v, _ := c.Arg("value")
	cmd := putCmd(w.str(c, "path"), v, nil)
	if _, ok := c.Arg("version"); ok {
		cmd.Version = u64(w.num(c, "version", 0))
	}
	cmd.WriteHeader, cmd.MakeParents = w.header(c, tc), w.flag(c, "parents")
	w.tenant(c, &cmd)
	return w.apply(tc, cmd, func(r Result) string {
		return cmd.Path + " at version " + strconv.FormatUint(r.Node.Version, 10)
	})
}

// cmdDelete deletes path=: as session s= if named, else as an operator
// (an admin, who may delete any session's ephemeral node).
func (w *world) cmdDelete(c *ddCase) string {
	tc := w.cell(c)
	cmd := delCmd(w.str(c, "path"), nil)
	if _, ok := c.Arg("s"); ok {
		cmd.Admin, cmd.WriteHeader = false, w.header(c, tc)
	}
	return w.apply(tc, cmd, func(r Result) string { return "deleted " + r.Node.Path })
}

// cmdLock: session s= asks for the lock dir= (mode=shared, else
// exclusive; delay= its lock-delay in ms; parents: make the directory):
// the create of its ephemeral sequential lock node.
func (w *world) cmdLock(c *ddCase) string {
	tc := w.cell(c)
	mode := api.LockExclusive
	if m, _ := c.Arg("mode"); m == "shared" || m == "permit" {
		mode = api.LockMode(m)
	}
	dir := w.str(c, "dir")
	id := w.session(c, tc, "s")
	cmd := delayedLockCmd(id, dir, mode, int64(w.num(c, "delay", 0)))
	cmd.MakeParents = w.flag(c, "parents")
	cmd.Permits = int64(w.num(c, "permits", 0))
	return w.apply(tc, cmd, func(r Result) string {
		tc.tokens[tc.names[id]+" "+dir] = r.Token
		out := tc.names[id] + " queued " + api.Base(r.Node.Path) + " (" + string(mode) + "), token " + tokenStr(r.Token) + ", "
		switch {
		case r.WaitFor == "":
			return out + "granted"
		case r.WaitFor == dir:
			return out + "waits for the lock-delay of " + dir
		case r.WaitFor == r.Node.Path:
			return out + "waits for its grant"
		}
		return out + "waits for " + api.Base(r.WaitFor)
	})
}

// ownLockNode is the first lock node of session id in dir, "" if none.
func (tc *tcell) ownLockNode(dir string, id uint64) string {
	q, _, _ := tc.h.s.LockQueue(dir, 1<<20)
	for _, e := range q {
		if e.Session == id {
			return e.Node
		}
	}
	return ""
}

// cmdUnlock: session s= deletes its (first) lock node in dir=, a clean
// release.
func (w *world) cmdUnlock(c *ddCase) string {
	tc := w.cell(c)
	dir := w.str(c, "dir")
	id := w.session(c, tc, "s")
	p := tc.ownLockNode(dir, id)
	if p == "" {
		p = dir + "/(none of " + tc.names[id] + ")"
	}
	cmd := Command{Op: OpDelete, Path: p, WriteHeader: api.WriteHeader{Session: id}}
	return w.apply(tc, cmd, func(r Result) string { return tc.names[id] + " released " + api.Base(r.Node.Path) })
}

// cmdEndDelay: the leader ends the lock-delay of dir= that the release
// at since= began (default: the release of the delay in force now).
func (w *world) cmdEndDelay(c *ddCase) string {
	tc := w.cell(c)
	dir := w.str(c, "dir")
	d, _ := tc.h.s.LockDelayOf(dir)
	cmd := endDelayCmd(dir, w.num(c, "since", d.Since))
	return w.apply(tc, cmd, func(Result) string {
		return "end of the lock-delay of " + dir + " begun @" + strconv.FormatUint(cmd.Since, 10)
	})
}

// cmdCheck asks whether a token holds the lock dir= now: token=E:I, or
// the token session s= was given for its last lock node there.
func (w *world) cmdCheck(c *ddCase) string {
	tc := w.cell(c)
	dir := w.str(c, "dir")
	var tok uint64
	if v, ok := c.Arg("token"); ok {
		e, i, _ := strings.Cut(v, ":")
		ep, err1 := strconv.ParseUint(e, 10, 64)
		ix, err2 := strconv.ParseUint(i, 10, 64)
		if err1 != nil || err2 != nil {
			w.t.Fatalf("%s: token=%q: want EPOCH:INDEX", c.Pos, v)
		}
		tok = api.MakeToken(ep, ix)
	} else {
		name := w.str(c, "s")
		tok = tc.tokens[name+" "+dir]
	}
	valid, holders := tc.h.s.CheckToken(dir, tok)
	hs := make([]string, len(holders))
	for i, h := range holders {
		hs[i] = tokenStr(h)
	}
	verdict := "refused"
	if valid {
		verdict = "valid"
	}
	return "token " + tokenStr(tok) + " on " + dir + ": " + verdict + "; holders: " + orNone(strings.Join(hs, ", ")) + "\n"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
