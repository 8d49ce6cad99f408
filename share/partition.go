package share

import (
	"time"
)

// Batch is the offset range of one record batch the caller read from the log.
type Batch struct {
	First, Last int64
}

// AcquiredRange is a run of consecutive records acquired by one fetch with one delivery count, as
// ShareFetch answers them.
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int16
}

// Partition is one share group's state of one topic partition. It is not safe for concurrent use.
type Partition struct {
	config Config
	// startOffset is the SPSO: every offset below it is acknowledged or archived.
	// Invariant: startOffset <= endOffset().
	startOffset int64
	// records[i] is offset startOffset+i. Invariant: records[0], if any, is not terminal.
	records []record
	// acquiredCount is the number of Acquired records in the window.
	acquiredCount int
	// dirty: the persisted form changed since the last Checkpoint.
	dirty bool
	// Totals since the partition was loaded, for reporting.
	acknowledgedTotal, archivedTotal int64
}

// NewPartition starts a partition with nothing in flight at startOffset (the group's
// share.auto.offset.reset position). It is dirty: its start must be persisted.
func NewPartition(config Config, startOffset int64) *Partition {
	return &Partition{config: config, startOffset: startOffset, dirty: true}
}

// SetConfig changes the policy from now on; records already acquired keep their deadlines.
func (p *Partition) SetConfig(config Config) { p.config = config }

// Config returns the partition's policy.
func (p *Partition) Config() Config { return p.config }

// StartOffset is the SPSO.
func (p *Partition) StartOffset() int64 { return p.startOffset }

// EndOffset is the SPEO (exclusive): the first offset never fetched for the group.
func (p *Partition) EndOffset() int64 { return p.startOffset + int64(len(p.records)) }

// Dirty reports whether the persisted form changed since the last Checkpoint.
func (p *Partition) Dirty() bool { return p.dirty }

// MarkDirty makes the next Checkpoint necessary again (after a failed write).
func (p *Partition) MarkDirty() { p.dirty = true }

func (p *Partition) at(offset int64) *record { return &p.records[offset-p.startOffset] }

// NextFetchOffset is where the caller should read the log from: the first available record in the
// window, or the window's end if the window may grow. ok is false when nothing can be acquired
// now (the window is full and every record in it is locked or done).
func (p *Partition) NextFetchOffset(now time.Time) (offset int64, ok bool) {
	p.expire(now)
	for i := range p.records {
		if p.records[i].state == Available {
			return p.startOffset + int64(i), true
		}
	}
	if len(p.records) < p.config.MaxInFlight {
		return p.EndOffset(), true
	}
	return 0, false
}

// Acquire locks for member the available records of batches (read from the log in order,
// starting at the batch holding NextFetchOffset, all below the high watermark) until at least
// maxRecords are acquired, whole batches at a time; with strict, it stops at exactly maxRecords.
// Records past the window's end join the window while it holds fewer than MaxInFlight records.
// It returns the acquired records as ranges, in offset order.
func (p *Partition) Acquire(now time.Time, member string, batches []Batch, maxRecords int, strict bool) []AcquiredRange {
	p.expire(now)
	if member == "" || maxRecords <= 0 {
		return nil
	}
	var out []AcquiredRange
	acquired := 0
	defer p.advance() // gap records archived at the window's front
	deadline := now.Add(p.config.LockDuration)
	take := func(offset int64, r *record) {
		r.transition(offset, Acquired)
		r.owner, r.deadline = member, deadline
		if r.deliveryCount < 1<<15-1 {
			r.deliveryCount++
		}
		p.acquiredCount++
		acquired++
		if n := len(out); n > 0 && out[n-1].Last+1 == offset && out[n-1].DeliveryCount == r.deliveryCount {
			out[n-1].Last = offset
		} else {
			out = append(out, AcquiredRange{First: offset, Last: offset, DeliveryCount: r.deliveryCount})
		}
	}
	for _, b := range batches {
		if b.Last < b.First {
			continue
		}
		for offset := max(b.First, p.startOffset); offset <= b.Last; offset++ {
			if strict && acquired >= maxRecords {
				return out
			}
			end := p.EndOffset()
			if offset > end {
				// Offsets missing from the log (none in sluice's dense logs) are done already.
				if !p.extend(offset-end, Archived) {
					return out
				}
				p.dirty = true
				end = offset
			}
			if offset == end {
				if !p.extend(1, Available) {
					return out
				}
			}
			if r := p.at(offset); r.state == Available {
				take(offset, r)
			}
		}
		if acquired >= maxRecords {
			break
		}
	}
	return out
}

// extend appends n records in state to the window, if it has room for them.
func (p *Partition) extend(n int64, state RecordState) bool {
	if int64(len(p.records))+n > int64(p.config.MaxInFlight) {
		return false
	}
	for range n {
		p.records = append(p.records, record{state: state})
		if state == Archived {
			p.archivedTotal++
		}
	}
	return true
}

// expire releases every record whose lock ended at or before now.
func (p *Partition) expire(now time.Time) int {
	if p.acquiredCount == 0 {
		return 0
	}
	released := 0
	for i := range p.records {
		r := &p.records[i]
		if r.state == Acquired && !r.deadline.After(now) {
			p.release(p.startOffset+int64(i), r)
			released++
		}
	}
	if released > 0 {
		p.advance()
	}
	return released
}

// Expire releases the records whose locks ended at or before now and reports how many.
func (p *Partition) Expire(now time.Time) int { return p.expire(now) }

// NextDeadline is the earliest lock deadline, zero if nothing is acquired.
func (p *Partition) NextDeadline() time.Time {
	var next time.Time
	if p.acquiredCount == 0 {
		return next
	}
	for i := range p.records {
		r := &p.records[i]
		if r.state == Acquired && (next.IsZero() || r.deadline.Before(next)) {
			next = r.deadline
		}
	}
	return next
}

// release ends an acquisition without acknowledgement: the record is available again, or
// archived once it has been delivered DeliveryCountLimit times.
func (p *Partition) release(offset int64, r *record) {
	p.acquiredCount--
	if int(r.deliveryCount) >= p.config.DeliveryCountLimit {
		r.transition(offset, Archived)
		p.archivedTotal++
	} else {
		r.transition(offset, Available)
	}
	p.dirty = true
}

// ReleaseMember releases every record member holds (its session closed or it left the group) and
// reports how many.
func (p *Partition) ReleaseMember(now time.Time, member string) int {
	p.expire(now)
	if p.acquiredCount == 0 {
		return 0
	}
	released := 0
	for i := range p.records {
		r := &p.records[i]
		if r.state == Acquired && r.owner == member {
			p.release(p.startOffset+int64(i), r)
			released++
		}
	}
	p.advance()
	return released
}

// advance moves the SPSO past every leading acknowledged or archived record.
func (p *Partition) advance() {
	n := 0
	for n < len(p.records) && p.records[n].state.terminal() {
		n++
	}
	if n == 0 {
		return
	}
	p.startOffset += int64(n)
	clear(p.records[:n])
	p.records = p.records[n:]
	if len(p.records) == 0 {
		p.records = nil
	}
	p.dirty = true
}

// AdvanceStart moves the SPSO up to logStart when the log's start moved past it (retention):
// records below it are gone, whoever held them. It does nothing when logStart <= SPSO.
func (p *Partition) AdvanceStart(logStart int64) {
	if logStart <= p.startOffset {
		return
	}
	drop := min(logStart-p.startOffset, int64(len(p.records)))
	for i := range drop {
		r := &p.records[i]
		if r.state == Acquired {
			p.acquiredCount--
		}
		if !r.state.terminal() {
			p.archivedTotal++
		}
	}
	clear(p.records[:drop])
	p.records = p.records[drop:]
	p.startOffset = logStart
	if len(p.records) == 0 {
		p.records = nil
	}
	p.advance()
	p.dirty = true
}

// Reset discards the window and starts again at offset (AlterShareGroupOffsets); whatever was
// acquired is forgotten.
func (p *Partition) Reset(offset int64) {
	p.records = nil
	p.acquiredCount = 0
	p.startOffset = offset
	p.dirty = true
}

// Summary is what describing a share partition reports.
type Summary struct {
	StartOffset, EndOffset                      int64
	Available, Acquired, Acknowledged, Archived int
	// AcknowledgedTotal and ArchivedTotal count since the partition was loaded.
	AcknowledgedTotal, ArchivedTotal int64
}

// Summary counts the window's records by state.
func (p *Partition) Summary() Summary {
	s := Summary{StartOffset: p.startOffset, EndOffset: p.EndOffset(), AcknowledgedTotal: p.acknowledgedTotal, ArchivedTotal: p.archivedTotal}
	for i := range p.records {
		switch p.records[i].state {
		case Available:
			s.Available++
		case Acquired:
			s.Acquired++
		case Acknowledged:
			s.Acknowledged++
		case Archived:
			s.Archived++
		}
	}
	return s
}

// Lag is how many records below highWatermark are not yet done.
func (p *Partition) Lag(highWatermark int64) int64 {
	if highWatermark <= p.startOffset {
		return 0
	}
	lag := highWatermark - p.startOffset
	for i := range p.records {
		if p.startOffset+int64(i) >= highWatermark {
			break
		}
		if p.records[i].state.terminal() {
			lag--
		}
	}
	return lag
}

// Holds reports whether member has records acquired here (locks not yet ended at now).
func (p *Partition) Holds(now time.Time, member string) bool {
	if p.acquiredCount == 0 {
		return false
	}
	for i := range p.records {
		if r := &p.records[i]; r.state == Acquired && r.owner == member && r.deadline.After(now) {
			return true
		}
	}
	return false
}
