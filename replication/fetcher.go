package replication

// A fetcher brings one leader's batches to every local follower replica of that leader, over one
// connection. The connection carries several requests at once: one data fetch for every partition
// that is ready to fetch (it may wait at the leader for new data), OffsetForLeaderEpoch for
// partitions that must first find their divergence point, and acknowledgement fetches (no data,
// no wait) that report durable offsets as soon as the follower's fsync completes.
//
// Responses come back in request order, so a data fetch parked at the leader would hold back every
// response behind it. The leader therefore answers a follower's parked fetch as soon as the next
// request arrives on the same connection (broker.session), and this side keeps one data fetch in
// flight: partitions that become ready while it waits are announced with an acknowledgement fetch,
// which returns the parked fetch at once, and join the next data fetch. Two data fetches never
// alternate returning each other.

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
	// maxAcksInFlight bounds the acknowledgement fetches in flight; a second and later one goes
	// out only once the last was sent ackPipelineAfter ago (see mayAck).
	maxAcksInFlight  = 3
	ackPipelineAfter = 50 * time.Millisecond
	dialTimeout      = 2 * time.Second
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
	// failedReportDue: when this replica's failed copy is next reported (failed_copy.go).
	failedReportDue time.Time
}

type requestKind int

const (
	kindData requestKind = iota
	kindAck
	kindEpochs
)

type inFlightRequest struct {
	sentAt        time.Time
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
	// lastHeard is when the leader last answered; lastReport when it was last reported
	// unreachable. Owned by the fetcher goroutine.
	lastHeard, lastReport time.Time
}

// unreachableReportInterval paces the reports of a leader that stays silent. The controller moves
// leadership once a report has been repeated for a while (coordinator's unreachableSettle, 400 ms),
// so the pace decides how soon after that while the move comes.
const unreachableReportInterval = 200 * time.Millisecond

// checkLeaderSilence reports the leader to the controller while it has not answered for
// FetchMaxWait plus LeaderUnreachableAfter and this broker follows partitions of it.
func (f *fetcher) checkLeaderSilence(now time.Time) {
	m := f.manager
	if m.reportUnreachable == nil || m.config.LeaderUnreachableAfter == 0 || now.Sub(f.lastHeard) < m.config.FetchMaxWait+m.config.LeaderUnreachableAfter || now.Sub(f.lastReport) < unreachableReportInterval {
		return
	}
	if len(m.partitionsOf(f.leaderID)) == 0 {
		return
	}
	f.lastReport = now
	f.logger.Warn("replication: leader silent; reporting it to the controller", "leader", f.leaderID, "silent_for", now.Sub(f.lastHeard).Round(time.Millisecond))
	go m.reportUnreachable(f.leaderID)
}

// silenceCheckIn is how long the fetcher may wait before it must look at its leader's silence
// again: until a report falls due or the oldest request in pending becomes overdue, and at most
// unreachableReportInterval. Waking exactly then, rather than on the next interval, matters: the
// report is what moves leadership off a leader nobody can reach, and every millisecond until it
// is a millisecond without acks.
func (f *fetcher) silenceCheckIn(now time.Time, pending []inFlightRequest) time.Duration {
	wait := unreachableReportInterval
	cfg := f.manager.config
	if cfg.LeaderUnreachableAfter == 0 {
		return wait
	}
	limit := cfg.FetchMaxWait + cfg.LeaderUnreachableAfter
	due := f.lastHeard.Add(limit)
	if next := f.lastReport.Add(unreachableReportInterval); next.After(due) {
		due = next
	}
	wait = min(wait, due.Sub(now))
	if len(pending) > 0 {
		wait = min(wait, pending[0].sentAt.Add(limit+time.Millisecond).Sub(now))
	}
	return max(wait, time.Millisecond)
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
			if c, err = dialLeader(address, f.manager.config.NodeID, dialTimeout, f.manager.config.TLS, f.manager.config.Authenticate); err == nil {
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
		f.checkLeaderSilence(time.Now())
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
	acksInFlight := 0
	var lastAckSent time.Time
	dataInFlight := false
	// nudged: an acknowledgement fetch went out to return the parked data fetch, so that partitions
	// ready since it was sent join the next one.
	nudged := false
	for {
		now := time.Now()
		f.checkLeaderSilence(now)
		if f.manager.config.LeaderUnreachableAfter > 0 && len(pending) > 0 && now.Sub(pending[0].sentAt) > f.manager.config.FetchMaxWait+f.manager.config.LeaderUnreachableAfter {
			return fmt.Errorf("replication: leader %d has not answered a request for %v", f.leaderID, now.Sub(pending[0].sentAt).Round(time.Millisecond))
		}
		partitions := f.manager.partitionsOf(f.leaderID)
		if len(pending) < maxRequestsInFlight {
			var check, data []*followed
			for _, p := range partitions {
				if p.inFlight || now.Before(p.pausedUntil) || copyFailed(p) {
					continue // a failed copy is only reported, by acknowledgement fetches
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
				pending = append(pending, inFlightRequest{sentAt: time.Now(), correlationID: id, kind: kindEpochs, partitions: check})
			}
			switch {
			case len(data) > 0 && !dataInFlight && len(pending) < maxRequestsInFlight:
				id, err := c.send(f.fetchRequest(data, false))
				if err != nil {
					return err
				}
				markInFlight(data)
				dataInFlight, nudged = true, false
				pending = append(pending, inFlightRequest{sentAt: time.Now(), correlationID: id, kind: kindData, partitions: data})
			case len(data) > 0 && !nudged && acksInFlight == 0 && len(pending) < maxRequestsInFlight:
				// Ready partitions wait for the data fetch in flight; have the leader return it now.
				ackDirty = true
				nudged = true
			}
		}
		ackDirty = ackDirty || failedReportsDue(partitions, now)
		if ackDirty && mayAck(acksInFlight, lastAckSent, now) && len(pending) < maxRequestsInFlight {
			var acks []*followed
			for _, p := range partitions {
				if failedReportDue(p, now) || (!p.needsEpochCheck && f.durableOf(p) > p.reportedDurable) {
					acks = append(acks, p)
				}
			}
			if len(acks) == 0 && nudged && dataInFlight {
				// Nothing new is durable, but a data fetch must come back: any request does it.
				for _, p := range partitions {
					if !p.needsEpochCheck && !p.inFlight {
						acks = append(acks, p)
						break
					}
				}
			}
			ackDirty = false
			if len(acks) > 0 {
				id, err := c.send(f.fetchRequest(acks, true))
				if err != nil {
					return err
				}
				acksInFlight++
				lastAckSent = time.Now()
				pending = append(pending, inFlightRequest{sentAt: time.Now(), correlationID: id, kind: kindAck, partitions: acks})
			}
		}

		// Paused partitions come back when their pause ends, even while requests are in flight;
		// a leader that stops answering is noticed the moment its silence passes the limit.
		var timeout <-chan time.Time
		silence := f.silenceCheckIn(now, pending)
		if wait, paused := nextPauseEnd(partitions, now); paused {
			timeout = time.After(min(wait, silence))
		} else if len(pending) == 0 {
			timeout = time.After(f.manager.config.RetryBackoff)
		} else if ackDirty && acksInFlight > 0 && acksInFlight < maxAcksInFlight && len(pending) < maxRequestsInFlight {
			timeout = time.After(min(max(time.Until(lastAckSent.Add(ackPipelineAfter)), 0), silence))
		} else {
			timeout = time.After(silence)
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
			f.lastHeard = time.Now()
			if len(pending) == 0 || pending[0].correlationID != resp.correlationID {
				return fmt.Errorf("replication: leader %d answered correlation id %d out of order", f.leaderID, resp.correlationID)
			}
			request := pending[0]
			pending = pending[1:]
			var err error
			switch request.kind {
			case kindData:
				dataInFlight = false
				err = f.handleFetch(request.partitions, resp.body)
			case kindAck:
				acksInFlight--
				ackDirty = true // report what completed meanwhile
			case kindEpochs:
				err = f.handleEpochs(request.partitions, resp.body)
			}
			// Appends copied the records to the log and parsing copied the rest.
			c.recycle(resp.buf)
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

// mayAck reports whether an acknowledgement fetch may go out with inFlight others in flight, the
// last sent at lastSent. One at a time while they come back quickly, as on a healthy link; when
// the last has been out for ackPipelineAfter, another may follow (up to maxAcksInFlight). With
// one at a time, a link with 270 ms of delay each way held each durable report for up to a round
// trip behind the previous one: acks=all took 1-1.5 s instead of about 0.6 s, and produce
// requests timed out.
func mayAck(inFlight int, lastSent, now time.Time) bool {
	return inFlight == 0 || (inFlight < maxAcksInFlight && now.Sub(lastSent) >= ackPipelineAfter)
}

// nextPauseEnd is how long until the first paused partition may fetch again.
func nextPauseEnd(partitions []*followed, now time.Time) (time.Duration, bool) {
	var first time.Time
	for _, p := range partitions {
		if !p.inFlight && now.Before(p.pausedUntil) && (first.IsZero() || p.pausedUntil.Before(first)) {
			first = p.pausedUntil
		}
	}
	return first.Sub(now), !first.IsZero()
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
		// What the request reports is what counts as reported: a flush completing after this
		// point is reported by the next acknowledgement fetch.
		reported := f.durableOf(p)
		p.reportedDurable = reported
		var durable [8]byte
		binary.BigEndian.PutUint64(durable[:], uint64(reported))
		rp.UnknownTags.Set(DurableOffsetTag, durable[:])
		if cannotCopy(p) {
			rp.UnknownTags.Set(FailedCopyTag, []byte{})
			p.failedReportDue = time.Now().Add(failedCopyReportInterval)
		}
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
			if !ok || !f.manager.stillFollowing(p) || copyFailed(p) {
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
			wasFull := p.replica.Log.OutOfSpace()
			end, err := p.replica.AppendFromLeader(rp.RecordBatches)
			if err != nil {
				switch {
				case p.replica.Log.OutOfSpace():
					// Reported to the leader as a copy that takes no appends (failed_copy.go).
					if !wasFull {
						f.manager.logger.Error("replication: the disk is full; out of the ISR until the leader's records fit",
							"topic", rt.Topic, "partition", rp.Partition, "leader", f.leaderID, "retry_every", diskFullRetryInterval, "err", err)
					}
					p.pausedUntil = time.Now().Add(diskFullRetryInterval)
				case errors.Is(err, protocol.NotLeaderOrFollower):
					f.manager.logger.Warn("replication: append from leader", "topic", rt.Topic, "partition", rp.Partition, "leader", f.leaderID, "err", err)
					p.pausedUntil = time.Now().Add(f.manager.config.RetryBackoff)
				default:
					f.manager.logger.Warn("replication: append from leader", "topic", rt.Topic, "partition", rp.Partition, "leader", f.leaderID, "err", err)
					p.needsEpochCheck = true
				}
				continue
			}
			if wasFull {
				f.manager.logger.Info("replication: the leader's records fit again", "topic", rt.Topic, "partition", rp.Partition, "leader", f.leaderID)
			}
			p.replica.SetFollowerHighWatermark(rp.HighWatermark)
			f.manager.observeFetched(len(rp.RecordBatches))
			if end > before {
				appended = true
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
			logEnd := r.Log.LogEndOffset()
			target, settled, err := r.ResolveDivergence(rp.LeaderEpoch, rp.EndOffset)
			if err != nil {
				f.manager.logger.Error("replication: truncate", "topic", r.Topic, "partition", r.Partition, "err", err)
				p.pausedUntil = time.Now().Add(f.manager.config.RetryBackoff)
				continue
			}
			if target < logEnd {
				f.manager.logger.Info("replication: truncated a divergent tail", "topic", r.Topic, "partition", r.Partition,
					"from", logEnd, "to", target, "leader", f.leaderID, "leader_epoch", p.leaderEpoch)
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
