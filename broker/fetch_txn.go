package broker

// read_committed in Fetch: a consumer with isolation level 1 reads below the last stable offset
// (partition_txn.go) rather than the high watermark, and each partition's answer lists the aborted
// transactions overlapping what it returns (producer id and first offset, from the .txnindex), so
// the consumer drops their records. read_uncommitted answers a null list. Followers read the whole
// log, markers included.

import "github.com/sluice-mq/sluice/segment"

// fetchUpTo is where a consumer fetch stops and the last stable offset it reports.
func (b *Broker) fetchUpTo(p *partition, isolationLevel int8, highWatermark int64) (int64, error) {
	if isolationLevel != 1 {
		return highWatermark, nil // read_uncommitted: the stable offset reported is the watermark
	}
	stable, err := p.lastStableOffset()
	if err != nil {
		return 0, err
	}
	return min(stable, highWatermark), nil
}

func appendAbortedTransactions(buf []byte, isolationLevel int8, aborted []segment.AbortedTxn, flexible bool) []byte {
	if isolationLevel != 1 {
		return appendArrayLength(buf, -1, flexible)
	}
	buf = appendArrayLength(buf, len(aborted), flexible)
	for _, a := range aborted {
		buf = appendInt64(buf, a.ProducerID)
		buf = appendInt64(buf, a.FirstOffset)
		buf = appendNoTags(buf, flexible)
	}
	return buf
}
