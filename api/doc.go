// Package api holds the wire contract shared by the server, the proxy and the
// SDK: request and response types, stable error codes, path rules, limits and
// the fencing-token format. It imports nothing from the rest of the module.
package api
