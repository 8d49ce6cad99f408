package segment

import (
	"os"

	"golang.org/x/sys/unix"
)

// Preallocating the rest of a busy segment. Steps keep an idle partition's reservation small, but a
// busy one pays for them: each step is a fallocate in the append path, which waits for ext4's
// journal when a commit is running (another file's fsync, Raft's among them), and every append to
// the partition, and every request queued behind it on the same connection, waits with it (a
// fallocate of one 64 MiB step took 115 ms just after a Raft fsync in a traced run). A three-node
// cluster at 375,000 msg/s (8 partitions, 3 replicas, 64 MiB steps) crossed its steps on all
// partitions at about the same moment, and the worst second of many runs sat there. So a segment
// whose steps have reached Config.PreallocateStep (it has taken that much since it was opened)
// preallocates all the rest at its next step: one fallocate per busy segment instead of one per
// step. Measured on that cluster with --replica-ack=memory, three pairs of 30 s runs interleaved
// with the build before: publish p99 38.7, 17.9 and 26.5 ms against 46.1, 34.3 and 27.8 ms; with
// fsync acks, no difference beyond that machine's noise.
//
// It does so only where the space is plainly there: never on tmpfs or ramfs, where preallocating is
// taking memory, and only when the filesystem keeps, after it, an eighth of its size and two whole
// segments free; otherwise the steps go on as before.

const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// roomForRest reports whether file's filesystem can give rest more bytes of preallocation and still
// keep an eighth of its size and two segments of segmentBytes free.
func roomForRest(file *os.File, rest, segmentBytes int64) bool {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(file.Fd()), &fs); err != nil {
		return false
	}
	if fs.Type == tmpfsMagic || fs.Type == ramfsMagic {
		return false
	}
	blockSize := int64(fs.Bsize)
	free := int64(fs.Bavail) * blockSize
	reserve := max(int64(fs.Blocks)*blockSize/8, 2*segmentBytes)
	return free-rest >= reserve
}
