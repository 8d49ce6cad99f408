package replication

// Failed copies.
//
// A log whose fsync or write failed takes no more appends until it is reopened (segment.Log.Failure:
// the kernel may have dropped the unflushed pages). Such a copy can neither take produce as a
// leader nor make acks=all progress as a follower, and waiting for the lag time to notice stalls
// every partition it is in sync for. Kafka takes a failed log directory offline and the controller
// moves leadership and ISR membership off it; sluice does the same per partition:
//
//   - Leader side: the ISR check (runISRChecks) finds a led replica whose log failed and asks the
//     controller to hand leadership to another live in-sync replica (the Resigner, as for damaged
//     logs), which also takes this node out of the ISR.
//   - Follower side: the fetcher stops fetching the partition and says its copy failed, with
//     FailedCopyTag, in an acknowledgement fetch at once (the failed flush pokes it) and then every
//     failedCopyReportInterval. The leader takes it out of the ISR at its next check and does not let
//     it back in while the tag comes (FollowerPosition.CopyFailed). After a restart the log opens
//     again, the tag stops, and the replica catches up and rejoins as any other.
//   - A follower whose last append found its disk full (segment.Log.OutOfSpace) lost nothing but
//     takes no appends either: it says so with the same tag, so that it leaves the ISR at once
//     instead of stalling acks=all for the lag time, and tries the leader's records again every
//     diskFullRetryInterval. The first append that fits clears OutOfSpace; the tag stops, and the
//     replica catches up and rejoins.

import (
	"errors"
	"time"
)

// FailedCopyTag is the tagged field (on a Fetch request partition, v12+, empty) by which a follower
// says that its copy of the partition failed. Leaders that do not know it ignore it.
const FailedCopyTag = 0x534d

// failedCopyReportInterval paces the reports of a copy that stays failed.
const failedCopyReportInterval = time.Second

// diskFullRetryInterval paces a full-disk follower's attempts to append the leader's records.
const diskFullRetryInterval = 500 * time.Millisecond

// copyFailed reports whether p's local log failed.
func copyFailed(p *followed) bool { return p.replica.Log.Failure() != nil }

// cannotCopy reports whether p's local log takes no appends: it failed, or its last append found
// the disk full. The leader hears it as FailedCopyTag.
func cannotCopy(p *followed) bool { return copyFailed(p) || p.replica.Log.OutOfSpace() }

// failedReportDue reports whether p's copy takes no appends and the leader is due to hear it.
func failedReportDue(p *followed, now time.Time) bool {
	return !now.Before(p.failedReportDue) && cannotCopy(p)
}

// failedReportsDue reports whether any of partitions is due a failed-copy report.
func failedReportsDue(partitions []*followed, now time.Time) bool {
	for _, p := range partitions {
		if failedReportDue(p, now) {
			return true
		}
	}
	return false
}

// resignFailedLeaders asks the controller to move leadership off every replica in leading whose
// log failed or whose last append found the disk full (at most once per resignRetryInterval
// each). A full disk fails no log, but its leader takes no produce until space comes back, while
// another in-sync replica may have room: Kafka takes such a log directory offline too.
func (m *Manager) resignFailedLeaders(leading []*Replica, now time.Time) {
	for _, r := range leading {
		cause := r.Log.Failure()
		what := "a failed log"
		if cause == nil && r.Log.OutOfSpace() {
			cause, what = errDiskFull, "a full disk"
		}
		if cause == nil {
			continue
		}
		m.resign(r, now, what, func(epoch int32) {
			m.logger.Error("replication: this leader's log takes no appends (an fsync or write error, or a full disk); asking the controller to move leadership to an in-sync replica",
				"topic", r.Topic, "partition", r.Partition, "leader_epoch", epoch, "err", cause)
		})
	}
}

var errDiskFull = errors.New("replication: the last append found the disk full")
