// Package group is the classic Kafka consumer-group state machine (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup and the membership checks of OffsetCommit), as pure code: no I/O, no goroutines, no
// clock. The caller passes the time into every operation, supplies new member ids, keeps the
// connections whose JoinGroup and SyncGroup requests wait ("parked" requests), and runs Tick at
// NextDeadline. Answers to parked requests come back in an Outcome, keyed by member id.
//
// # States
//
//	from                 to                   when
//	Empty                PreparingRebalance   a member joins
//	PreparingRebalance   CompletingRebalance  every member rejoined, or the rebalance deadline passed
//	PreparingRebalance   Empty                the join phase ended with no member left
//	CompletingRebalance  Stable               the leader's SyncGroup brought the assignment
//	CompletingRebalance  PreparingRebalance   a member joined, left, changed protocols or expired,
//	                                          or the sync deadline passed without the leader's SyncGroup
//	Stable               PreparingRebalance   a member joined, left, changed protocols or expired,
//	                                          or the leader rejoined
//	Empty                Dead                 EmptyRetention after the last member left (expiry)
//	Empty (and any)      Dead                 DeleteGroups on a group without members
//
// Every state change goes through Group.transition (state.go), which panics on a transition outside
// the table there.
//
// # Rules followed (Kafka's classic group coordinator)
//
//   - JoinGroup v4+ without a member id gets a new id and MEMBER_ID_REQUIRED; the id is "pending"
//     until the member rejoins with it or its session timeout passes. Pending ids keep the join
//     phase open.
//   - The join phase ends when every member and pending id has rejoined, or at the rebalance
//     deadline (now + the largest rebalance timeout when the phase began); members that did not
//     rejoin are removed. A group leaving Empty waits at least InitialRebalanceDelay, extended by
//     each new member up to the deadline, so that consumers starting together share one rebalance.
//   - The wait for the leader's SyncGroup ends at the sync deadline (the end of the join phase plus
//     the largest rebalance timeout): members that have not sent SyncGroup, the leader among them,
//     are removed, and the others rebalance; their parked SyncGroups get REBALANCE_IN_PROGRESS.
//   - The generation grows by one each time the join phase ends. The protocol is the one every
//     member supports that most members prefer (ties: lowest name). The leader stays if still a
//     member, otherwise it is the member that joined first. Only the leader gets the member list.
//   - A static member (group.instance.id) that rejoins without a member id gets a new id, its old
//     id is fenced (FENCED_INSTANCE_ID on anything it sends, and on its parked requests), and in a
//     Stable group with unchanged protocols no rebalance happens: it gets the current generation.
//   - Members' sessions expire SessionTimeout after the last JoinGroup, SyncGroup, Heartbeat or
//     OffsetCommit, except while a JoinGroup or SyncGroup of theirs is parked.
//
// # Invariants
//
//   - generation >= 0 and never decreases.
//   - Every member id in staticMembers names a member with that instance id, and back.
//   - A member is awaitingJoin only in PreparingRebalance, awaitingSync only in CompletingRebalance.
//   - leader is "" or a member id; it is a member id in CompletingRebalance and Stable.
//   - syncDeadline is set exactly in CompletingRebalance.
//   - members is empty in Empty and Dead.
//   - emptyUntil is set exactly in an Empty group that had members (with EmptyRetention > 0).
//   - protocolType stays when the group empties (Kafka reports an Empty consumer group as
//     "consumer"); a member joining an Empty group sets it anew.
package group
