package replication

// A fetcher brings one leader's batches to every local follower replica of that leader, over one
// connection. Each partition has at most one data fetch in flight, but the connection carries
// several requests at once: data fetches for different partitions, OffsetForLeaderEpoch for
// partitions that must first find their divergence point, and acknowledgement fetches (no data,
// no wait) that report durable offsets as soon as the follower's fsync completes, so acks=all never
// waits for a parked data fetch to come back.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// DurableOffsetTag is the tagged field (on a Fetch request partition, v12+) in which a follower
// reports its durable offset: 8 bytes, big-endian. Leaders that do not know it ignore it.
const DurableOffsetTag = 0x534c

const (
	fetchVersion        = 12
	epochRequestVersion = 4
	maxRequestsInFlight = 4
	dialTimeout         = 2 * time.Second
)

type partitionKey struct {
	topic     string
	partition int32
}

// followed is one replica's fetch state; owned by the fetcher goroutine except where noted.
type followed struct {
	replica     *Replica
	leaderEpoch int32
	// needsEpochCheck: ask the leader where this replica's last epoch ends before fetching.
	needsEpochCheck bool
	inFlight        bool      // a data fetch or epoch check for it is in flight
	pausedUntil     time.Time // after an error
	reportedDurable int64     // durable offset last sent to the leader
}

type requestKind int

const (
	kindData requestKind = iota
	kindAck
	kindEpochs
)

type inFlightRequest struct {
	correlationID int32
	kind          requestKind
	partitions    []*followed
}

type fetcher struct {
	manager  *Manager
	leaderID int32
	logger   *slog.Logger
	// wake is poked (never blocking) when partitions change or a follower's flush completes.
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run keeps a connection to the leader and fetches until stop.
func (f *fetcher) run() {
	defer close(f.done)
	for {
		address, ok := f.manager.addressOf(f.leaderID)
		var err error
		if ok {
			var c *conn
			if c, err = dialLeader(address, f.manager.config.NodeID, dialTimeout); err == nil {
				err = f.serve(c)
				c.close()
			}
		} else {
			err = fmt.Errorf("replication: no address for leader %d", f.leaderID)
		}
		select {
		case <-f.stop:
			return
		default:
		}
		if err != nil {
			f.manager.logFetchError(f.leaderID, err)
		}
		select {
		case <-f.stop:
			return
		case <-time.After(f.manager.config.RetryBackoff):
		}
	}
}

// serve uses one connection until it fails or the fetcher stops.
func (f *fetcher) serve(c *conn) error {
	var pending []inFlightRequest
	// Every partition starts afresh on a new connection.
	for _, p := range f.manager.partitionsOf(f.leaderID) {
		p.inFlight = false
	}
	ackDirty := false
	ackInFlight := false
	for {
		now := time.Now()
		partitions := f.manager.partitionsOf(f.leaderID)
		if len(pending) < maxRequestsInFlight {
			var check, data []*followed
			for _, p := range partitions {
				if p.inFlight || now.Before(p.pausedUntil) {
					continue
				}
				if p.needsEpochCheck {
					check = append(check, p)
				} else {
					data = append(data, p)
				}
			}
			if len(check) > 0 {
				id, err := c.send(f.epochRequest(check))
				if err != nil {
					return err
				}
				markInFlight(check)
				pending = append(pending, inFlightRequest{correlationID: id, kind: kindEpochs, partitions: check})
			}
			if len(data) > 0 && len(pending) < maxRequestsInFlight {
				id, err := c.send(f.fetchRequest(data, false))
				if err != nil {
					return err
				}
				markInFlight(data)
				for _, p := range data {
					p.reportedDurable = max(p.reportedDurable, f.durableOf(p))
				}
				pending = append(pending, inFlightRequest{correlationID: id, kind: kindData, partitions: data})
			}
		}
		if ackDirty && !ackInFlight && len(pending) < maxRequestsInFlight {
			var acks []*followed
			for _, p := range partitions {
				if !p.needsEpochCheck && f.durableOf(p) > p.reportedDurable {
					acks = append(acks, p)
				}
			}
			ackDirty = false
			if len(acks) > 0 {
				id, err := c.send(f.fetchRequest(acks, true))
				if err != nil {
					return err
				}
				for _, p := range acks {
					p.reportedDurable = f.durableOf(p)
				}
				ackInFlight = true
				pending = append(pending, inFlightRequest{correlationID: id, kind: kindAck, partitions: acks})
			}
		}

		var timeout <-chan time.Time
		if len(pending) == 0 {
			timeout = time.After(f.manager.config.RetryBackoff) // paused partitions come back
		}
		select {
		case <-f.stop:
			return nil
		case <-f.wake:
			ackDirty = true
		case <-timeout:
		case resp := <-c.responses:
			if resp.err != nil {
				return resp.err
			}
			if len(pending) == 0 || pending[0].correlationID != resp.correlationID {
				return fmt.Errorf("replication: leader %d answered correlation id %d out of order", f.leaderID, resp.correlationID)
			}
			request := pending[0]
			pending = pending[1:]
			var err error
			switch request.kind {
			case kindData:
				err = f.handleFetch(request.partitions, resp.body)
			case kindAck:
				ackInFlight = false
				ackDirty = true // report what completed meanwhile
			case kindEpochs:
				err = f.handleEpochs(request.partitions, resp.body)
			}
			for _, p := range request.partitions {
				if request.kind != kindAck {
					p.inFlight = false
				}
			}
			if err != nil {
				return err
			}
		}
	}
}

func markInFlight(partitions []*followed) {
	for _, p := range partitions {
		p.inFlight = true
	}
}

// durableOf is what the follower reports as durable.
func (f *fetcher) durableOf(p *followed) int64 {
	if f.manager.config.AckMode == AckMemory {
		return p.replica.Log.LogEndOffset()
	}
	return p.replica.Log.FlushedOffset()
}

func (f *fetcher) fetchRequest(partitions []*followed, ackOnly bool) *kmsg.FetchRequest {
	cfg := f.manager.config
	req := kmsg.NewPtrFetchRequest()
	req.Version = fetchVersion
	req.ReplicaID = cfg.NodeID
	req.MaxWaitMillis = int32(cfg.FetchMaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = cfg.FetchMaxBytes
	req.SessionEpoch = -1
	if ackOnly {
		req.MaxWaitMillis, req.MaxBytes = 0, 0
	}
	byTopic := map[string]int{}
	for _, p := range partitions {
		i, ok := byTopic[p.replica.Topic]
		if !ok {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = p.replica.Topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[p.replica.Topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.replica.Partition
		rp.CurrentLeaderEpoch = p.leaderEpoch
		rp.FetchOffset = p.replica.Log.LogEndOffset()
		rp.LastFetchedEpoch = p.replica.Epochs.LastEpoch()
		rp.LogStartOffset = p.replica.Log.LogStartOffset()
		rp.PartitionMaxBytes = cfg.PartitionMaxBytes
		if ackOnly {
			rp.PartitionMaxBytes = 0
		}
		var durable [8]byte
		binary.BigEndian.PutUint64(durable[:], uint64(f.durableOf(p)))
		rp.UnknownTags.Set(DurableOffsetTag, durable[:])
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

func (f *fetcher) handleFetch(partitions []*followed, body []byte) error {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = fetchVersion
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("replication: parse fetch response from leader %d: %w", f.leaderID, err)
	}
	if resp.ErrorCode != 0 {
		return fmt.Errorf("replication: fetch from leader %d: error %d", f.leaderID, resp.ErrorCode)
	}
	byKey := map[partitionKey]*followed{}
	for _, p := range partitions {
		byKey[partitionKey{p.replica.Topic, p.replica.Partition}] = p
	}
	appended := false
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			p, ok := byKey[partitionKey{rt.Topic, rp.Partition}]
			if !ok || !f.manager.stillFollowing(p) {
				continue
			}
			if rp.ErrorCode != 0 {
				f.partitionError(p, rp.ErrorCode, rp.LogStartOffset)
				continue
			}
			if rp.LogStartOffset > p.replica.Log.LogStartOffset() {
				// The leader's records before it were deleted (DeleteRecords): so are this copy's.
				p.replica.Log.AdvanceLogStart(min(rp.LogStartOffset, p.replica.Log.LogEndOffset()))
			}
			before := p.replica.Log.LogEndOffset()
			end, err := p.replica.AppendFromLeader(rp.RecordBatches)
			if err != nil {
				f.manager.logger.Warn("replication: append from leader", "topic", rt.Topic, "partition", rp.Partition, "leader", f.leaderID, "err", err)
				if errors.Is(err, protocol.NotLeaderOrFollower) {
					p.pausedUntil = time.Now().Add(f.manager.config.RetryBackoff)
				} else {
					p.needsEpochCheck = true
				}
				continue
			}
			p.replica.SetFollowerHighWatermark(rp.HighWatermark)
			if end > before {
				appended = true
				f.manager.observeFetched(end - before)
				if f.manager.config.AckMode == AckFsync {
					p.replica.Log.NotifyFlushed(end-1, func(error) { f.poke() })
				}
			}
		}
	}
	if appended && f.manager.config.AckMode == AckMemory {
		f.poke()
	}
	return nil
}

func (f *fetcher) partitionError(p *followed, code int16, leaderLogStart int64) {
	backoff := f.manager.config.RetryBackoff
	switch code {
	case protocol.OffsetOutOfRange.Code:
		if p.replica.Log.LogEndOffset() > leaderLogStart {
			p.needsEpochCheck = true // ahead of the leader: find the divergence point
			return
		}
		if f.resetBehindLeaderStart(p, leaderLogStart) { // catch_up.go
			return
		}
		backoff = 10 * backoff
	case protocol.CorruptMessage.Code:
		backoff = f.leaderLogDamaged(p) // damage.go
	case protocol.FencedLeaderEpoch.Code, protocol.UnknownLeaderEpoch.Code, protocol.NotLeaderOrFollower.Code:
		// Metadata moves on; Follow will bring the new epoch.
	default:
		f.manager.logger.Warn("replication: fetch error", "topic", p.replica.Topic, "partition", p.replica.Partition, "leader", f.leaderID, "code", code)
	}
	p.pausedUntil = time.Now().Add(backoff)
}

func (f *fetcher) epochRequest(partitions []*followed) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = epochRequestVersion
	req.ReplicaID = f.manager.config.NodeID
	byTopic := map[string]int{}
	for _, p := range partitions {
		i, ok := byTopic[p.replica.Topic]
		if !ok {
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = p.replica.Topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			byTopic[p.replica.Topic] = i
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition = p.replica.Partition
		rp.CurrentLeaderEpoch = p.leaderEpoch
		rp.LeaderEpoch = p.replica.Epochs.LastEpoch()
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// handleEpochs truncates each partition to where its log and the leader's agree.
func (f *fetcher) handleEpochs(partitions []*followed, body []byte) error {
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	resp.Version = epochRequestVersion
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("replication: parse OffsetForLeaderEpoch response from leader %d: %w", f.leaderID, err)
	}
	byKey := map[partitionKey]*followed{}
	for _, p := range partitions {
		byKey[partitionKey{p.replica.Topic, p.replica.Partition}] = p
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			p, ok := byKey[partitionKey{rt.Topic, rp.Partition}]
			if !ok || !f.manager.stillFollowing(p) {
				continue
			}
			if rp.ErrorCode != 0 {
				f.partitionError(p, rp.ErrorCode, -1)
				continue
			}
			r := p.replica
			target, settled := divergencePoint(r.Epochs.Entries(), r.Log.LogEndOffset(), r.Log.LogStartOffset(), rp.LeaderEpoch, rp.EndOffset)
			if target < r.Log.LogEndOffset() {
				f.manager.logger.Info("replication: truncating a divergent tail", "topic", r.Topic, "partition", r.Partition,
					"from", r.Log.LogEndOffset(), "to", target, "leader", f.leaderID, "leader_epoch", p.leaderEpoch)
				if err := r.TruncateTo(target); err != nil {
					f.manager.logger.Error("replication: truncate", "topic", r.Topic, "partition", r.Partition, "err", err)
					p.pausedUntil = time.Now().Add(f.manager.config.RetryBackoff)
					continue
				}
				f.manager.observeTruncation()
			}
			// Unsettled: the leader answered an epoch this log never had, so the cut is at the
			// end of an older epoch of ours; ask again about that one.
			p.needsEpochCheck = !settled
			if settled {
				f.truncateDamaged(p) // damage.go
			}
		}
	}
	return nil
}

// divergencePoint is where a follower must cut its log, given the leader's answer to "where does
// my last epoch end" (leaderEpoch, endOffset; -1 when the leader knows no epoch that old), and
// whether that settles it. When the leader answers an epoch the follower also has, both logs agree
// up to the smaller end of that epoch: settled. When the follower never had the leader's epoch, it
// cuts at the end of its own largest older epoch and must ask again about that epoch.
func divergencePoint(entries []EpochEntry, logEnd, logStart int64, leaderEpoch int32, endOffset int64) (int64, bool) {
	if len(entries) == 0 {
		return logEnd, true // nothing written under any epoch: nothing to compare (an empty or legacy log)
	}
	if leaderEpoch < 0 || endOffset < 0 {
		return logStart, true // the leader shares none of our epochs
	}
	ownEpoch, ownEnd := endOffsetFor(entries, leaderEpoch, logEnd)
	if ownEpoch < 0 {
		return logStart, true // every epoch we have is newer than the leader's answer
	}
	return min(endOffset, ownEnd, logEnd), ownEpoch == leaderEpoch
}
