package chaos

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/chaos/history"
	"github.com/sluice-mq/sluice/localcluster"
	"github.com/sluice-mq/sluice/segment"
)

// finalRead reads every partition from its start to its high watermark after healing and records
// the records in offset order, a few thousand per event.
func finalRead(bootstrap []string, recorder *history.Recorder, cfg Config) error {
	const id = 251
	probe, err := newClient(bootstrap, id)
	if err != nil {
		return err
	}
	defer probe.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var ends map[int32]int64
	for ends == nil {
		if ends, err = endOffsets(ctx, probe, cfg.Topic, int32(cfg.Partitions)); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("chaos: final read: %w", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	offsets := map[string]map[int32]kgo.Offset{cfg.Topic: {}}
	for p := range int32(cfg.Partitions) {
		offsets[cfg.Topic][p] = kgo.NewOffset().AtStart()
	}
	consumer, err := newClient(bootstrap, id, kgo.ConsumePartitions(offsets), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return err
	}
	defer consumer.Close()
	pending := map[int32][]history.Record{}
	flush := func(p int32) {
		if len(pending[p]) > 0 {
			recorder.Record(history.Event{Process: "final", Type: history.OK, F: history.FinalRead, Topic: cfg.Topic, Records: pending[p]})
			pending[p] = nil
		}
	}
	next := map[int32]int64{}
	remaining := 0
	for p, end := range ends {
		if end > 0 {
			remaining++
		}
		next[p] = -1
	}
	for remaining > 0 {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("chaos: final read gave up with %d partitions unfinished (ends %v, reached %v)", remaining, ends, next)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			pending[r.Partition] = append(pending[r.Partition], history.Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			next[r.Partition] = r.Offset + 1
			if len(pending[r.Partition]) >= 5000 {
				flush(r.Partition)
			}
			if r.Offset == ends[r.Partition]-1 {
				remaining--
			}
		})
	}
	for p := range pending {
		flush(p)
	}
	// An empty event still says that the final read happened.
	recorder.Record(history.Event{Process: "final", Type: history.OK, F: history.FinalRead, Topic: cfg.Topic, Offsets: ends})
	return nil
}

// groupDrain joins the group once more after healing and consumes, committing, until the group's
// committed offsets reach every partition's end.
func groupDrain(bootstrap []string, recorder *history.Recorder, cfg Config) error {
	const id = 252
	probe, err := newClient(bootstrap, id)
	if err != nil {
		return err
	}
	defer probe.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ends, err := endOffsets(ctx, probe, cfg.Topic, int32(cfg.Partitions))
	if err != nil {
		return fmt.Errorf("chaos: group drain: %w", err)
	}
	member, err := newClient(bootstrap, id, kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond), kgo.SessionTimeout(6*time.Second))
	if err != nil {
		return err
	}
	defer member.Close()
	for {
		committed, err := fetchCommitted(ctx, probe, cfg.Group, cfg.Topic)
		if err == nil {
			caughtUp := true
			for p, end := range ends {
				caughtUp = caughtUp && (end == 0 || committed[p] >= end)
			}
			if caughtUp {
				recorder.Record(history.Event{Process: "drain", Type: history.OK, F: history.GroupDrain, Topic: cfg.Topic, Detail: "caught-up", Offsets: committed})
				return nil
			}
		}
		pollCtx, cancelPoll := context.WithTimeout(ctx, time.Second)
		fetches := member.PollFetches(pollCtx)
		cancelPoll()
		if records := pollRecords(fetches, cfg.Topic); len(records) > 0 {
			recorder.Record(history.Event{Process: "drain", Type: history.OK, F: history.GroupDrain, Topic: cfg.Topic, Records: records})
		}
		if err := member.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("chaos: the group did not catch up with %v within 3 minutes", ends)
		}
	}
}

// digestReplicas stops every node cleanly and records each replica of the topic as its batches.
func digestReplicas(c *localcluster.Cluster, recorder *history.Recorder, cfg Config) error {
	var errs []error
	for _, n := range c.Nodes {
		if err := n.Stop(60 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("chaos: stop node %d: %w", n.ID, err))
		}
	}
	for _, n := range c.Nodes {
		for p := range int32(cfg.Partitions) {
			batches, err := replicaBatches(filepath.Join(n.DataDir, "topics", fmt.Sprintf("%s-%d", cfg.Topic, p)))
			if err != nil {
				errs = append(errs, fmt.Errorf("chaos: node %d's replica of partition %d: %w", n.ID, p, err))
				continue
			}
			recorder.Record(history.Event{Process: "runner", F: history.Replica, Topic: cfg.Topic, Node: n.ID, Partition: p, Batches: batches})
		}
	}
	return errors.Join(errs...)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// replicaBatches reads a stopped node's log with the segment package and digests every batch:
// offsets, length, epoch and a CRC-32C of all its bytes as stored.
func replicaBatches(dir string) ([]history.Batch, error) {
	cfg := segment.DefaultConfig()
	cfg.Preallocate = false
	log, err := segment.Open(dir, cfg)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	var out []history.Batch
	end := log.LogEndOffset()
	for offset := log.LogStartOffset(); offset < end; {
		chunk, err := log.Read(offset, 8<<20, end, nil)
		if err != nil {
			return out, fmt.Errorf("read at %d: %w", offset, err)
		}
		before := offset
		batch.Scan(chunk, func(h batch.Header, raw []byte) error {
			out = append(out, history.Batch{BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), Length: h.BatchLength,
				LeaderEpoch: h.PartitionLeaderEpoch, CRC: crc32.Checksum(raw, castagnoli)})
			offset = h.NextOffset()
			return nil
		})
		if offset == before {
			return out, fmt.Errorf("no whole batch at %d", offset)
		}
	}
	return out, nil
}
