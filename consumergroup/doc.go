// Package consumergroup holds the state of KIP-848 consumer groups as pure code: no I/O, no
// goroutines, no clock (the caller passes the time into every operation and keeps the timers).
//
// # The protocol
//
// Members heartbeat (ConsumerGroupHeartbeat) with their subscription (topic names or a regular
// expression resolved here against the topics the caller passes) and the partitions they own. The
// group has an epoch, bumped by every change of membership, subscription or subscribed topics'
// partition counts. When the group epoch moves past the assignment epoch the server-side assignor
// ("uniform", the default, or "range") computes a target assignment for every member and the
// assignment epoch catches up. Each member then converges on its target, one heartbeat at a time:
//
//	Stable                member epoch == assignment epoch; owns its target
//	UnrevokedPartitions   owns partitions its target lost: it is told to give them up and keeps
//	                      its epoch until a heartbeat's owned partitions no longer hold them
//	                      (within its rebalance timeout, else it is removed)
//	UnreleasedPartitions  epoch moved to the assignment epoch, but some target partitions are
//	                      still held (or pending revocation) by another member; they are added
//	                      on a later heartbeat once released
//
// A partition is never assigned to two members at once: one is added to a member's assignment
// only when no other member holds it or has it pending revocation. Members whose partitions stay
// put never stop: a join costs the others only the partitions they give to the newcomer.
//
// Static members (instance ids) leave with epoch -2: they keep their assignment until their session
// times out, and a member joining with the same instance id takes over member epoch and assignment
// (UNRELEASED_INSTANCE_ID while the old member is still in the group).
//
// # Invariants
//
//   - The group epoch never decreases; assignmentEpoch <= epoch; every member's epoch is at most
//     the assignment epoch.
//   - No partition is in two members' Assigned ∪ PendingRevocation.
//   - A member's PendingRevocation is non-empty iff its state is UnrevokedPartitions.
//
// Record and Load give the group's durable form (the broker persists it through the Raft
// coordinator, so membership survives a coordinator failover).
package consumergroup
