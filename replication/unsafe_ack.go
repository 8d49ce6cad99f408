package replication

// A deliberately broken build for the chaos suite (issue 11), which must prove that its checker
// fails when acks=all is broken: with Config.UnsafeLeaderOnlyAck, a leader answers acks=all as
// soon as a batch is in its own log, before any follower has it. A leader cut off from its
// followers then keeps acknowledging records that the next leader never had; they are truncated
// away when it rejoins, and the checker reports them lost. Off by default; sluiced sets it only
// from the test-only environment variable SLUICE_TEST_UNSAFE_LEADER_ACK (cmd/sluiced/test_hooks.go).

// unsafeLeaderOnlyAcked is the offset acks=all waiters are answered below in the broken build.
func unsafeLeaderOnlyAcked(leaderLogEnd int64) int64 { return leaderLogEnd }
