package main

import (
	"log/slog"
	"os"

	"golang.org/x/sys/unix"
)

// raiseFileLimit lifts the soft RLIMIT_NOFILE to the hard limit: every partition holds segment
// files open and every client a socket, and the usual soft default (1024) runs out long before
// the machine does. It returns the limit in force.
func raiseFileLimit(logger *slog.Logger) uint64 {
	var limit unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &limit); err != nil {
		logger.Warn("cannot read the open file limit", "err", err)
		return 0
	}
	if limit.Cur < limit.Max {
		raised := unix.Rlimit{Cur: limit.Max, Max: limit.Max}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &raised); err != nil {
			logger.Warn("cannot raise the open file limit to the hard limit", "soft", limit.Cur, "hard", limit.Max, "err", err)
			return limit.Cur
		}
		logger.Info("raised the open file limit to the hard limit", "from", limit.Cur, "to", limit.Max)
		return limit.Max
	}
	return limit.Cur
}

// minDescriptorHeadroom is the number of free descriptors below which the limit is called low:
// room for connections, segment rolls and the metadata store.
const minDescriptorHeadroom = 1024

// warnIfFileLimitLow warns when the descriptors already open (mostly partition segment files)
// leave little room under the limit for connections and new segments.
func warnIfFileLimitLow(logger *slog.Logger, limit uint64, partitions, maxConnections int) {
	entries, err := os.ReadDir("/proc/self/fd")
	if limit == 0 || err != nil {
		return
	}
	open := uint64(len(entries))
	want := uint64(minDescriptorHeadroom)
	if maxConnections > 0 {
		want = max(want, uint64(maxConnections)+64)
	}
	if open+want > limit {
		logger.Warn("the open file limit is low for the partitions held: raise the hard RLIMIT_NOFILE (ulimit -Hn, LimitNOFILE=)",
			"limit", limit, "open", open, "partitions", partitions, "wantFree", want, "maxConnections", maxConnections)
	}
}
