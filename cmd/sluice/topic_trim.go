package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicTrim deletes a partition's records before an offset (DeleteRecords, which franz-go routes to
// the partition's leader).
func topicTrim(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice topic trim", "NAME --partition P --before OFFSET", `Delete a partition's records before an offset: the log start moves there, reads below it fail
with OFFSET_OUT_OF_RANGE and whole segments below it are deleted. --before -1 deletes every record
below the high watermark. Topics whose cleanup.policy is only "compact" refuse it.
Example: sluice topic trim orders --partition 0 --before 1000`)
	partition := fs.Int("partition", -1, "the partition")
	before := fs.Int64("before", -2, "delete the records below this offset (-1: the high watermark)")
	positional, err := fs.parse(args, io.out, 1, 1)
	if err != nil {
		return err
	}
	if *partition < 0 || *before < -1 {
		return usageErrorf(fs.name, "give --partition P (0 or more) and --before OFFSET (0 or more, or -1)")
	}
	name := positional[0]
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = int32(fs.globals.timeout.Milliseconds())
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = name
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = int32(*partition), *before
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(rctx, s.raw)
	if errors.Is(err, kerr.UnknownTopicOrPartition) { // franz-go looks the leader up first
		return topicNotFound(name)
	}
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("trim %s-%d: the broker answered for %d topics", name, *partition, len(resp.Topics))
	}
	result := resp.Topics[0].Partitions[0]
	switch code := result.ErrorCode; {
	case code == kerr.UnknownTopicOrPartition.Code:
		return topicNotFound(fmt.Sprintf("%s (partition %d)", name, *partition))
	case code != 0:
		return fmt.Errorf("trim %s-%d before %d: %w", name, *partition, *before, kerr.ErrorForCode(code))
	}
	if fs.globals.json {
		return writeJSON(io.out, map[string]any{"topic": name, "partition": *partition, "log_start_offset": result.LowWatermark})
	}
	fmt.Fprintf(io.out, "trimmed %s-%d: log start offset %d\n", name, *partition, result.LowWatermark)
	return nil
}
