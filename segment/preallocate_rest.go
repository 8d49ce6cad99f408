package segment

import (
	"os"

	"golang.org/x/sys/unix"
)

// Preallocating the rest of a busy segment. Steps keep an idle partition's reservation small, but a
// busy one pays for them: each step is a fallocate in the append path, which waits for ext4's
// journal when a commit is running (another file's fsync, Raft's among them), and every append to
// the partition, and every request queued behind it on the same connection, waits with it. A
// three-node cluster at 375,000 msg/s (8 partitions, 3 replicas, 64 MiB steps) saw the publish p99
// swing between 40 and 580 ms from run to run, with its worst second each time where the partitions
// crossed a step together; with the whole segment preallocated at the first append the p99 was
// 20-39 ms over four runs, and 50-56 ms against 59-71 ms with fsync acks. So a segment whose steps
// have reached Config.PreallocateStep (it has taken that much since it was opened) preallocates all
// the rest at its next step: one fallocate per segment instead of one per step.
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
