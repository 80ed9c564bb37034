package httpapi

import _ "embed"

// statusPage is GET /status: plain HTML and JS, no build step. It reads
// /v1/status/cluster every 5 s and, for a lock path, /v1/lock/queue.
//
//go:embed status.html
var statusPage []byte
