// Package loglimit keeps repetitive log lines from flooding the log. A Limiter passes at most
// Burst lines per Interval to its slog.Logger and counts the rest; the next line it passes
// carries the count of lines dropped since the previous one ("suppressed"), so nothing is lost
// silently. A bad client that sends a malformed frame on each of thousands of connections costs
// a few lines a minute, not one per frame.
//
// Each log site that a remote peer can trigger at will gets its own Limiter, so one noisy site
// does not hide another. A Limiter is safe for concurrent use and holds no package-level state.
//
// Invariant: within any window of Interval starting at a refill, at most Burst lines are passed.
package loglimit
