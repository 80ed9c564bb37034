package api

// Checks a lockd makes of a request before it finds the cell, on the
// request alone: pure, so the server (server/httpapi) and the fake cell
// (tests/fake) refuse the same requests with the same answers.

import "slices"

// CheckWatchKind accepts no watch or one of the allowed kinds.
func CheckWatchKind(k WatchKind, allowed ...WatchKind) error {
	if k == "" || slices.Contains(allowed, k) {
		return nil
	}
	return Errorf(CodeBadRequest, "watch kind %q is not one of %v here", k, allowed)
}

// CheckCacheWindow refuses a negative declared cache window.
func CheckCacheWindow(ms int64) error {
	if ms < 0 {
		return Errorf(CodeBadRequest, "cache_window_ms %d is negative", ms)
	}
	return nil
}

// CheckNonce refuses a session open's nonce longer than MaxNonceLen.
func CheckNonce(nonce string) error {
	if len(nonce) > MaxNonceLen {
		return Errorf(CodeBadRequest, "nonce is %d bytes, limit %d", len(nonce), MaxNonceLen)
	}
	return nil
}

// CheckWatchesPerCall refuses a watch re-arm of n watches past
// MaxWatchesPerCall.
func CheckWatchesPerCall(n int) error {
	if n > MaxWatchesPerCall {
		return Errorf(CodeBadRequest, "%d watches, limit %d per call", n, MaxWatchesPerCall)
	}
	return nil
}
