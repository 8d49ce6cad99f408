package console

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/client"
)

// browseQuery is what the message browser was asked for: a partition, and where to start: an
// offset, a time (the first record at or after it) or, with neither, the newest Limit records.
type browseQuery struct {
	Partition int32
	Offset    int64 // -1: not given
	Time      time.Time
	Limit     int
}

const (
	defaultBrowseLimit = 50
	maxBrowseLimit     = 500
	// browseIdleWait is how long the browser waits for more records when the log end is not
	// reached yet (the rest of the range may be transaction markers or compacted away).
	browseIdleWait = 1500 * time.Millisecond
)

// timeLayout is what an <input type=datetime-local> sends (UTC is assumed).
const timeLayout = "2006-01-02T15:04"

func parseBrowseQuery(values url.Values) (browseQuery, error) {
	q := browseQuery{Offset: -1, Limit: defaultBrowseLimit}
	if s := values.Get("partition"); s != "" {
		p, err := strconv.ParseInt(s, 10, 32)
		if err != nil || p < 0 {
			return q, fmt.Errorf("partition %q: want a partition number", s)
		}
		q.Partition = int32(p)
	}
	if s := values.Get("offset"); s != "" {
		offset, err := strconv.ParseInt(s, 10, 64)
		if err != nil || offset < 0 {
			return q, fmt.Errorf("offset %q: want an offset (0 or more)", s)
		}
		q.Offset = offset
	}
	if s := values.Get("time"); s != "" {
		var err error
		for _, layout := range []string{timeLayout, timeLayout + ":05", time.RFC3339Nano} {
			if q.Time, err = time.Parse(layout, s); err == nil {
				break
			}
		}
		if err != nil {
			return q, fmt.Errorf("time %q: want YYYY-MM-DDTHH:MM[:SS] (UTC) or RFC 3339", s)
		}
	}
	if s := values.Get("limit"); s != "" {
		limit, err := strconv.Atoi(s)
		if err != nil || limit < 1 {
			return q, fmt.Errorf("limit %q: want a positive number", s)
		}
		q.Limit = min(limit, maxBrowseLimit)
	}
	return q, nil
}

// browsedRecord is one record as the browser shows it.
type browsedRecord struct {
	Offset    int64
	Timestamp time.Time
	Key       renderedValue
	Value     renderedValue
	Headers   []browsedHeader
}

type browsedHeader struct {
	Key   string
	Value renderedValue
}

// browseResult is one page of the browser.
type browseResult struct {
	Start, End int64 // the range read: [Start, End)
	Records    []browsedRecord
	// Incomplete says the browser stopped waiting before reaching the end of the range.
	Incomplete bool
}

// browse reads up to q.Limit records of one partition with consumer (the console's one message
// consumer, which the caller holds alone), from the resolved start up to the log end as it was
// when the read began, and unassigns the partition again. logStart and logEnd are the
// partition's current offsets.
func browse(ctx context.Context, consumer *client.Consumer, topic string, q browseQuery, logStart, logEnd int64) (browseResult, error) {
	result := browseResult{End: logEnd}
	tp := client.TopicPartition{Topic: topic, Partition: q.Partition}
	var at client.Offset
	switch {
	case !q.Time.IsZero():
		at = client.AtTime(q.Time)
	case q.Offset >= 0:
		at = client.AtOffset(min(max(q.Offset, logStart), logEnd))
	default:
		at = client.AtOffset(max(logStart, logEnd-int64(q.Limit)))
	}
	defer consumer.Unassign(tp)
	if err := consumer.Assign(ctx, client.Assignment{Topic: topic, Partition: q.Partition, Offset: at}); err != nil {
		return result, fmt.Errorf("console: read %s-%d from %s: %w", topic, q.Partition, at, err)
	}
	position, err := consumer.Position(tp)
	if err != nil {
		return result, fmt.Errorf("console: read %s-%d: %w", topic, q.Partition, err)
	}
	result.Start = position
	if position < 0 || position >= logEnd {
		result.Start = min(max(position, logStart), logEnd)
		return result, nil
	}
	for len(result.Records) < q.Limit {
		waitCtx, cancel := context.WithTimeout(ctx, browseIdleWait)
		fetches, err := consumer.Poll(waitCtx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			result.Incomplete = true
			break
		}
		if err != nil {
			return result, fmt.Errorf("console: read %s-%d: %w", topic, q.Partition, err)
		}
		next := int64(-1)
		for _, f := range fetches {
			if f.Topic != topic || f.Partition != q.Partition {
				continue // left from an earlier browse
			}
			if f.Err != nil {
				return result, fmt.Errorf("console: read %s-%d: %w", topic, q.Partition, f.Err)
			}
			for _, r := range f.Records {
				if len(result.Records) >= q.Limit || r.Offset >= logEnd {
					break
				}
				result.Records = append(result.Records, browsed(r))
				next = r.Offset + 1
			}
		}
		if next >= logEnd {
			break
		}
	}
	if n := len(result.Records); n > 0 {
		result.End = result.Records[n-1].Offset + 1
	}
	return result, nil
}

func browsed(r *client.Record) browsedRecord {
	record := browsedRecord{Offset: r.Offset, Timestamp: r.Timestamp, Key: renderValue(r.Key), Value: renderValue(r.Value)}
	for _, h := range r.Headers {
		record.Headers = append(record.Headers, browsedHeader{Key: h.Key, Value: renderValue(h.Value)})
	}
	return record
}
