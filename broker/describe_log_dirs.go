package broker

// DescribeLogDirs v0-v4: the broker's one log directory (DataDir/topics, as an absolute path) with
// the size of each local replica's log in it, led here or followed, for the topics and partitions
// asked (all when the topic list is null). Offset lag is 0 (it measures future replicas, which
// sluice never makes: AlterReplicaLogDirs is not served) and no replica is a future one. v4 adds the
// file system's total and usable bytes under the directory (-1 if statfs fails). Partitions not on
// this broker are left out, as Kafka does.

import (
	"path/filepath"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

func (b *Broker) handleDescribeLogDirs(r *request, req *kmsg.DescribeLogDirsRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = b.registry.dir
	if absolute, err := filepath.Abs(b.registry.dir); err == nil {
		dir.Dir = absolute
	}
	dir.TotalBytes, dir.UsableBytes = -1, -1
	var fs unix.Statfs_t
	if err := unix.Statfs(b.registry.dir, &fs); err == nil {
		dir.TotalBytes = int64(fs.Blocks) * fs.Bsize
		dir.UsableBytes = int64(fs.Bavail) * fs.Bsize
	}

	wanted := func(topic string, index int32) bool {
		if req.Topics == nil {
			return true
		}
		for _, rt := range req.Topics {
			if rt.Topic == topic && slices.Contains(rt.Partitions, index) {
				return true
			}
		}
		return false
	}
	snapshot := b.registry.snapshot()
	names := make([]string, 0, len(snapshot))
	for name := range snapshot {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		topic := kmsg.NewDescribeLogDirsResponseDirTopic()
		topic.Topic = name
		for _, p := range snapshot[name].partitions {
			if p == nil || !wanted(name, p.index) {
				continue
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size = p.index, p.log.Size()
			topic.Partitions = append(topic.Partitions, rp)
		}
		if len(topic.Partitions) > 0 {
			dir.Topics = append(dir.Topics, topic)
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	r.respond(resp)
}
