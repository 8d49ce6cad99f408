package main

import (
	"errors"
	"os"
	"syscall"
)

// Test-only fault hooks for the chaos suite (package chaos, issue 11), set from the environment
// only (no flag, not in --help), off unless their variable is set:
//
//	SLUICE_TEST_FSYNC_FAIL_FILE=path   while path exists, every log fsync fails with EIO
//	SLUICE_TEST_UNSAFE_LEADER_ACK=1    acks=all answered before followers have the batch (a
//	                                   deliberately broken build: replication/unsafe_ack.go)
func applyTestHooks(opts *options) {
	if path := os.Getenv("SLUICE_TEST_FSYNC_FAIL_FILE"); path != "" {
		opts.broker.Log.FsyncFault = func() error {
			if _, err := os.Stat(path); err == nil {
				return errors.Join(syscall.EIO, errors.New("chaos fsync fault file "+path+" exists"))
			}
			return nil
		}
	}
	if os.Getenv("SLUICE_TEST_UNSAFE_LEADER_ACK") == "1" {
		opts.broker.Replication.UnsafeLeaderOnlyAck = true
	}
}
