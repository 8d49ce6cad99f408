package share

import "fmt"

// StateRange is a run of consecutive records with one persisted state and delivery count.
type StateRange struct {
	First, Last   int64
	State         RecordState // Available, Acknowledged or Archived
	DeliveryCount int16
}

// Checkpoint is a partition's persisted form: the SPSO and every in-flight record that is not
// "available, never delivered", as ranges in offset order. Acquired records are persisted as
// available (their locks do not survive a restart), with their delivery counts.
type Checkpoint struct {
	StartOffset int64
	Ranges      []StateRange
}

// Checkpoint captures the persisted form and clears Dirty.
func (p *Partition) Checkpoint() Checkpoint {
	p.dirty = false
	cp := Checkpoint{StartOffset: p.startOffset}
	for i := range p.records {
		r := &p.records[i]
		state := r.state
		if state == Acquired {
			state = Available
		}
		if state == Available && r.deliveryCount == 0 {
			continue
		}
		offset := p.startOffset + int64(i)
		if n := len(cp.Ranges); n > 0 {
			last := &cp.Ranges[n-1]
			if last.Last+1 == offset && last.State == state && last.DeliveryCount == r.deliveryCount {
				last.Last = offset
				continue
			}
		}
		cp.Ranges = append(cp.Ranges, StateRange{First: offset, Last: offset, State: state, DeliveryCount: r.deliveryCount})
	}
	return cp
}

// Validate checks a checkpoint read back from storage: ranges in order, at or above the start,
// not overlapping, in a persisted state, delivery counts not negative.
func (cp Checkpoint) Validate() error {
	if cp.StartOffset < 0 {
		return fmt.Errorf("share: checkpoint start offset %d is negative", cp.StartOffset)
	}
	next := cp.StartOffset
	for _, r := range cp.Ranges {
		if r.First < next || r.Last < r.First {
			return fmt.Errorf("share: checkpoint range [%d, %d] out of order (next free offset %d)", r.First, r.Last, next)
		}
		if r.State == Acquired || r.State > Archived {
			return fmt.Errorf("share: checkpoint range [%d, %d] in state %s", r.First, r.Last, r.State)
		}
		if r.DeliveryCount < 0 {
			return fmt.Errorf("share: checkpoint range [%d, %d] delivery count %d", r.First, r.Last, r.DeliveryCount)
		}
		next = r.Last + 1
	}
	return nil
}

// maxRestoredWindow bounds the window a checkpoint may describe, so that a damaged one cannot
// make Restore allocate without limit.
const maxRestoredWindow = 1 << 22

// Restore rebuilds a partition from a checkpoint; nothing is acquired. Available records that
// reached the delivery count limit are archived. The window may exceed MaxInFlight if the limit
// was lowered; it then takes no new records until it shrinks.
func Restore(config Config, cp Checkpoint) (*Partition, error) {
	if err := cp.Validate(); err != nil {
		return nil, err
	}
	if n := len(cp.Ranges); n > 0 && cp.Ranges[n-1].Last-cp.StartOffset >= maxRestoredWindow {
		return nil, fmt.Errorf("share: checkpoint window [%d, %d] is longer than %d records", cp.StartOffset, cp.Ranges[n-1].Last, maxRestoredWindow)
	}
	p := &Partition{config: config, startOffset: cp.StartOffset}
	for _, r := range cp.Ranges {
		for range r.First - p.EndOffset() {
			p.records = append(p.records, record{state: Available})
		}
		for range r.Last - r.First + 1 {
			rec := record{state: r.State, deliveryCount: r.DeliveryCount}
			if rec.state == Available && int(rec.deliveryCount) >= config.DeliveryCountLimit {
				rec.state = Archived
				p.dirty = true
			}
			p.records = append(p.records, rec)
		}
	}
	// Trailing never-delivered records need no place in the window.
	for n := len(p.records); n > 0 && p.records[n-1].state == Available && p.records[n-1].deliveryCount == 0; n-- {
		p.records = p.records[:n-1]
	}
	p.advance()
	return p, nil
}
