// Package share holds the state of Kafka share groups (KIP-932) as pure code: no I/O, no
// goroutines, no clock. The caller passes the time into every operation, reads records from the log
// itself, keeps the share sessions and connections, and makes the state durable.
//
// # Share partitions
//
// A Partition is one share group's view of one topic partition: which of its records have been
// handed out, to whom, and how they ended. Records below the share-partition start offset (SPSO)
// are done (acknowledged or archived). The in-flight window runs from the SPSO to the end offset
// (SPEO, exclusive here: the next offset never fetched for the group); each record in it has a
// state and a delivery count:
//
//	state         meaning                                         persisted as
//	Available     may be acquired by the next fetch                Available, delivery count
//	Acquired      locked by one member until a deadline            Available, delivery count
//	Acknowledged  accepted by its member; never delivered again    Acknowledged
//	Archived      rejected, released or timed out past the         Archived
//	              delivery count limit, or gone from the log
//
// Transitions (record.go holds the table; anything else panics):
//
//	Available -> Acquired        a fetch acquires it (delivery count + 1)
//	Acquired  -> Acquired        the owner renews its lock (acknowledge type Renew)
//	Acquired  -> Acknowledged    the owner accepts it
//	Acquired  -> Available       the owner releases it, its lock times out, or the owner leaves,
//	                             while delivery count < limit
//	Acquired  -> Archived        the owner rejects it (or acknowledges a gap), or a release as above
//	                             with delivery count >= limit
//	Available -> Archived        the log start moved past it
//
// Acquisition takes the available records of the batches the caller read from NextFetchOffset
// on, whole batches at a time until MaxRecords (or exactly MaxRecords in strict mode), and extends
// the window with records never fetched before while it holds fewer than Config.MaxInFlight
// records. Acknowledgements of one request are all-or-nothing: if any offset is not acquired by
// the acknowledging member the whole request fails with INVALID_RECORD_STATE.
//
// Durability: Checkpoint captures what must survive a restart (the SPSO and the window's
// non-default records, as ranges); Restore rebuilds a Partition from it, with every acquired
// record available again. The caller persists checkpoints (in sluice, batched through the Raft
// coordinator) whenever Dirty reports a change; acquisitions alone do not make a partition dirty.
//
// # Share groups
//
// A Group is a share group's membership (group.go): members join, heartbeat and leave with
// ShareGroupHeartbeat; each member is assigned every partition of every topic it subscribes to
// (records, not partitions, are what members share); its member epoch moves to the group epoch
// whenever its assignment changes. Members whose session times out are removed by Tick.
//
// # Invariants
//
//   - startOffset <= endOffset; len(records) == endOffset - startOffset.
//   - The first record of a non-empty window is Available or Acquired (the SPSO moves past every
//     leading Acknowledged or Archived record at once).
//   - A record is Acquired iff it has an owner; acquiredCount counts them.
//   - New records extend the window only while len(records) < MaxInFlight.
//   - Delivery counts never decrease while a record is in the window, and an Available record's
//     count is below DeliveryCountLimit.
//   - A group's epoch never decreases; a member's epoch is at most the group epoch.
package share
