package cluster

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Close kills every process by PID and removes the cluster's directory
// (unless it was given or TESTCLUSTER_KEEP=1). It is safe to call twice.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		c.proxyMu.Lock()
		for _, p := range c.proxies {
			if p.PID() != 0 {
				_ = p.Kill()
			}
		}
		c.proxyMu.Unlock()
		_ = c.KillAll()
		for _, r := range c.relays {
			_ = r.Process.Kill()
			_ = r.Wait()
		}
		c.http.CloseIdleConnections()
		if c.removeDir {
			_ = os.RemoveAll(c.dir)
		} else if os.Getenv("TESTCLUSTER_KEEP") == "1" {
			c.opts.Logf("testcluster: data and logs kept in %s", c.dir)
		}
	})
}

// LogTail returns the last n lines of replica id's output.
func (c *Cluster) LogTail(id, n int) string {
	p, err := c.proc(id)
	if err != nil {
		return err.Error()
	}
	b, err := os.ReadFile(p.node.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 2*n+100 {
			lines = append(lines[:0], lines[len(lines)-n:]...)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LogTails returns the last n lines of every replica's output.
func (c *Cluster) LogTails(n int) string {
	var b strings.Builder
	ids := c.IDs()
	sort.Ints(ids)
	for _, id := range ids {
		fmt.Fprintf(&b, "----- replica %d (%s) last %d lines -----\n%s\n", id, c.Node(id).LogPath, n, c.LogTail(id, n))
	}
	return b.String()
}
