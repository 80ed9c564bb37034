package fsm

// Transcript commands of prefix moves (transcript_test.go): the old cell
// seals, the new cell stages the export page by page and serves it, or
// the move aborts (unseal) and the copy is dropped.

import (
	"strconv"
	"strings"

	"github.com/lockservice/lockd/api"
)

// cmdEnsure: the directory's ensure_prefix of prefix= at epoch= (a new
// prefix, or a raised epoch).
func (w *world) cmdEnsure(c *ddCase) string {
	tc := w.cell(c)
	cmd := ensureCmd(w.str(c, "prefix"), w.num(c, "epoch", 0))
	return w.apply(tc, cmd, func(r Result) string {
		return "serves " + cmd.Path + ", directory epoch " + strconv.FormatUint(r.Epoch, 10)
	})
}

// cmdSeal: the old cell seals prefix= for a move to cell to= (dir-index=
// the directory index of the migration's begin).
func (w *world) cmdSeal(c *ddCase) string {
	tc := w.cell(c)
	cmd := sealCmd(w.str(c, "prefix"), w.str(c, "to"), w.num(c, "dir-index", 1))
	return w.apply(tc, cmd, func(r Result) string {
		tc.seals[cmd.Path] = r
		return cmd.Path + " sealed for cell " + cmd.Cell + ": " + countDigest(r)
	})
}

func countDigest(r Result) string {
	d := r.Digest
	if len(d) > 12 {
		d = d[:12]
	}
	return strconv.Itoa(r.Count) + " entries, digest " + d
}

// cmdStage copies the sealed prefix= of cell from= to this cell in pages
// of page= entries (default 100) under directory epoch= by the driver of
// generation gen= (default 1), and prints every page.
func (w *world) cmdStage(c *ddCase) string {
	tc := w.cell(c)
	from, ok := w.cells[w.str(c, "from")]
	if !ok {
		w.t.Fatalf("%s: no cell %q", c.Pos, w.str(c, "from"))
	}
	prefix, epoch, gen := w.str(c, "prefix"), w.num(c, "epoch", 0), w.num(c, "gen", 1)
	size := int(w.num(c, "page", 100))
	var b strings.Builder
	after := ""
	for page := uint64(0); page < 1000; page++ {
		nodes, more, err := from.h.s.ExportPrefix(prefix, after, size)
		if err != nil {
			return b.String() + "export from " + from.name + ": " + errLine(err)
		}
		b.WriteString(w.apply(tc, stagePage(prefix, epoch, gen, page, !more, nodes...), func(r Result) string {
			out := "page " + strconv.FormatUint(page, 10)
			if r.Digest != "" {
				out += ", copy complete: " + countDigest(r) + " (" + sealAgrees(from.seals[prefix], r) + ")"
			}
			return out
		}))
		for _, n := range nodes {
			b.WriteString("  " + exportedLine(n) + "\n")
		}
		if !more || tc.h.s.PrefixState(prefix).State != PrefixStaging {
			break
		}
		after = nodes[len(nodes)-1].Path
	}
	return b.String()
}

func sealAgrees(seal, copy Result) string {
	if seal.Count == copy.Count && seal.Digest == copy.Digest {
		return "as sealed"
	}
	return "the seal had " + countDigest(seal)
}

// exportedLine is one entry of an export: a node or a kept lock-delay.
func exportedLine(n api.ExportedNode) string {
	out := n.Path
	if n.Kept {
		out += "  kept (no node)"
	} else {
		out += "  v" + strconv.FormatUint(n.Version, 10)
	}
	if len(n.Value) > 0 {
		out += "  " + strconv.Quote(string(n.Value))
	}
	if n.Tenant != "" {
		out += "  tenant " + n.Tenant
	}
	if n.DelayMS > 0 {
		out += "  lock-delay " + strconv.FormatInt(n.DelayMS, 10) + " ms"
	}
	if n.NextSeq > 0 {
		out += "  next seq " + strconv.FormatUint(n.NextSeq, 10)
	}
	return out
}

// cmdServe: the directory committed the move; the new cell serves the
// staged prefix= from this entry (ensure_prefix staged, epoch=, at= the
// proposer's clock).
func (w *world) cmdServe(c *ddCase) string {
	tc := w.cell(c)
	cmd := ensureCmd(w.str(c, "prefix"), w.num(c, "epoch", 0))
	cmd.Staged, cmd.AtMS = true, int64(w.num(c, "at", 0))
	return w.apply(tc, cmd, func(r Result) string {
		return "serves " + cmd.Path + ", directory epoch " + strconv.FormatUint(r.Epoch, 10)
	})
}

// cmdUnseal: the move aborted; the old cell serves prefix= again
// (dir-index= the directory index saying so, at= the proposer's clock).
func (w *world) cmdUnseal(c *ddCase) string {
	tc := w.cell(c)
	cmd := Command{Op: OpUnsealPrefix, Path: w.str(c, "prefix"), DirIndex: w.num(c, "dir-index", 1), AtMS: int64(w.num(c, "at", 0))}
	return w.apply(tc, cmd, func(r Result) string { return "serves " + cmd.Path + " again" })
}

// cmdDrop drops prefix=: a sealed prefix's nodes once moved, or an
// aborted move's staged copy.
func (w *world) cmdDrop(c *ddCase) string {
	tc := w.cell(c)
	cmd := Command{Op: OpDropPrefix, Path: w.str(c, "prefix")}
	return w.apply(tc, cmd, func(r Result) string { return "dropped " + cmd.Path })
}
