package httpapi

import _ "embed"

// statusPage is GET /status: plain HTML and JS, no build step. It reads
// /v1/status/health every 3 s and, for a lock path, /v1/lock/queue.
//
//go:embed status.html
var statusPage []byte
