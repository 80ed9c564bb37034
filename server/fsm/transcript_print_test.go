package fsm

// What a transcript prints (transcript_test.go): results, watch events,
// lock queues, nodes, lock-delays, sessions. Tokens print as E:I, the
// directory epoch in the high bits and the Raft index in the low bits
// (api.MakeToken); sessions by the names the transcript gave them.

import (
	"strconv"
	"strings"

	"github.com/lockservice/lockd/api"
)

func tokenStr(t uint64) string {
	return strconv.FormatUint(api.TokenEpoch(t), 10) + ":" + strconv.FormatUint(api.TokenIndex(t), 10)
}

func errLine(e *api.Error) string {
	out := "error " + string(e.Code) + ": " + e.Message
	if e.Cell != "" {
		out += " (cell " + e.Cell + ")"
	}
	return out + "\n"
}

var changeNames = map[ChangeType]string{
	ChangeCreated: "created", ChangeData: "data", ChangeDeleted: "deleted", ChangeChildren: "children",
	ChangeMoved: "moved", ChangeLockDelay: "lock-delay", ChangeLockDelayEnded: "lock-delay-ended",
}

// events prints the watch events of a command's changes, in the order
// the state machine reported them.
func (tc *tcell) events(changes []Change) string {
	var b strings.Builder
	for _, ch := range changes {
		b.WriteString("event " + changeNames[ch.Type] + " " + ch.Path + "\n")
	}
	return b.String()
}

// sessionName is a session's name in the transcript, or its id.
func (tc *tcell) sessionName(id uint64) string {
	if n, ok := tc.names[id]; ok {
		return n
	}
	return "#" + strconv.FormatUint(id, 10)
}

func delayStr(d LockDelay) string {
	out := strconv.FormatInt(d.MS, 10) + " ms from @" + strconv.FormatUint(d.Since, 10)
	if d.AtMS != 0 {
		out += ", clock " + strconv.FormatInt(d.AtMS, 10)
	}
	return out
}

// queue prints the lock queue of dir: each lock node in order with its
// mode, session, token and whether it holds or what it waits for.
func (tc *tcell) queue(dir string) string {
	s := tc.h.s
	head := "queue " + dir
	d, delayed := s.LockDelayOf(dir)
	if delayed {
		head += " (lock-delay " + delayStr(d) + ")"
	}
	if n, inUse, ok := s.SemaphoreOf(dir); ok {
		head += " (semaphore, " + strconv.Itoa(inUse) + " of " + strconv.Itoa(n) + " permits in use)"
	}
	q, _, err := s.LockQueue(dir, 1<<20)
	switch {
	case err != nil && delayed:
		return head + ": no directory; its lock-delay is kept\n"
	case err != nil:
		return head + ": no directory\n"
	case len(q) == 0:
		return head + ": empty\n"
	}
	var b strings.Builder
	b.WriteString(head + ":\n")
	for _, e := range q {
		state := "holds"
		if _, held, wf, _ := s.LockState(e.Node); !held && wf == dir {
			state = "waits for the lock-delay"
		} else if !held && wf == e.Node {
			state = "waits for its grant"
		} else if !held {
			state = "waits for " + api.Base(wf)
		}
		b.WriteString("  " + api.Base(e.Node) + "  " + string(e.Mode) + "  " + tc.sessionName(e.Session) + "  token " + tokenStr(e.Token) + "  " + state + "\n")
	}
	return b.String()
}

func (w *world) cmdQueue(c *ddCase) string { tc := w.cell(c); return tc.queue(w.str(c, "dir")) }

// cmdNodes lists the nodes under prefix= (the prefix root included), in
// path order.
func (w *world) cmdNodes(c *ddCase) string {
	tc := w.cell(c)
	prefix := w.str(c, "prefix")
	var b strings.Builder
	for _, p := range nodePaths(tc.h.s) {
		if p != prefix && !strings.HasPrefix(p, prefix+"/") {
			continue
		}
		b.WriteString(tc.nodeLine(p) + "\n")
	}
	if b.Len() == 0 {
		return "no nodes under " + prefix + "\n"
	}
	return b.String()
}

// nodeLine describes the node at p.
func (tc *tcell) nodeLine(p string) string {
	n := tc.h.s.nodes[p]
	out := p + "  v" + strconv.FormatUint(n.version, 10)
	if len(n.value) > 0 {
		out += "  " + strconv.Quote(string(n.value))
	}
	if api.Parent(p) == "/" {
		ps := tc.h.s.PrefixState(p)
		out += "  prefix " + ps.State + ", epoch " + strconv.FormatUint(ps.Epoch, 10)
		if ps.MovedTo != "" {
			out += ", moved to " + ps.MovedTo
		}
	}
	if n.ephemeral {
		out += "  ephemeral of " + tc.sessionName(n.owner)
	}
	if n.lock != api.LockNone {
		out += "  lock " + string(n.lock)
	}
	if n.tenant != "" {
		out += "  tenant " + n.tenant
	}
	if n.nextSeq > 0 {
		out += "  next seq " + strconv.FormatUint(n.nextSeq, 10)
	}
	return out
}

// cmdDelays lists the lock-delays in force, deleted directories' too.
func (w *world) cmdDelays(c *ddCase) string {
	tc := w.cell(c)
	var b strings.Builder
	for _, d := range tc.h.s.LockDelays() {
		b.WriteString(d.Dir + "  " + delayStr(d))
		if k, ok := tc.h.s.lockDelays[d.Dir]; ok {
			b.WriteString("  directory deleted: kept, next seq " + strconv.FormatUint(k.nextSeq, 10))
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "no lock-delays\n"
	}
	return b.String()
}

// cmdUsage prints what tenant= uses of the cell (its quota counts it).
func (w *world) cmdUsage(c *ddCase) string {
	tc := w.cell(c)
	t := w.str(c, "tenant")
	sessions, nodes, bytes := tc.h.s.Usage(t)
	return "tenant " + t + ": " + strconv.Itoa(sessions) + " sessions, " + strconv.Itoa(nodes) + " nodes, " + strconv.FormatInt(bytes, 10) + " bytes\n"
}

// cmdSessions lists the live sessions with their leases.
func (w *world) cmdSessions(c *ddCase) string {
	tc := w.cell(c)
	var b strings.Builder
	for _, si := range tc.h.s.Sessions() {
		b.WriteString(tc.sessionName(si.ID) + " = " + strconv.FormatUint(si.ID, 10) + "  lease " + strconv.FormatInt(si.LeaseMS, 10) +
			" ms  renewed under leader epoch " + strconv.FormatUint(si.ConfirmedEpoch, 10) + "  silent " + strconv.FormatInt(si.SilentMS, 10) + " ms\n")
	}
	if b.Len() == 0 {
		return "no sessions\n"
	}
	return b.String()
}
