// Package checker judges a chaos run from its recorded history alone (package history): pure
// code, no I/O, no clock, so that a history file can be checked again offline and the checker can
// be tested on made-up histories that contain each anomaly.
//
// The model is Jepsen's queue/log workload over a Kafka topic. Producers send uniquely valued
// records; readers and group members poll; after the faults heal, every partition is read whole
// (final-read) and the group drains to the end; then each stopped node's replicas are digested.
// The anomalies it reports, each with the records, offsets and the faults active around it:
//
//   - lost: a send acknowledged at (partition, offset) whose value is not there in the final read
//     (found elsewhere, it is reported as lost too, with where it was found);
//   - duplicated: a value of an idempotent producer at two offsets;
//   - phantom: a value in the log that no producer ever sent;
//   - gap: offsets of a final read not dense from the log start;
//   - reordered: a send acknowledged before another was invoked got the later offset (real-time
//     order on one partition), or a reader saw offset n+1 before n, or went backwards;
//   - inconsistent-read: a reader or group member read a value at an offset that holds another
//     value (or nothing) in the final log, i.e. it read data that was later truncated;
//   - diverged: two replicas of a partition differ below the high watermark (final read's end),
//     or one lacks batches below it;
//   - offset-backwards: the group's committed offset, as read by the monitor, went below a value
//     read earlier or below a commit acknowledged before the read began;
//   - group-missed: after healing, an acknowledged record that no group member ever received;
//   - unavailable: an interval longer than Options.UnavailableLimit with no acknowledged send
//     while a majority of nodes was healthy (no active fault marks them), measured over all
//     partitions together and per partition.
//
// Failed and indeterminate sends are never required to be present: Kafka's errors such as
// NOT_ENOUGH_REPLICAS_AFTER_APPEND or a request timeout leave the record possibly written.
package checker
