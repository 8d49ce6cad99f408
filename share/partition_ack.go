package share

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/protocol"
)

// AckType is how a member ends (or extends) its acquisition of a record, with Kafka's numbers.
type AckType int8

const (
	// Gap: the offset holds no record (compaction); it is archived.
	Gap AckType = 0
	// Accept: processed; never delivered again.
	Accept AckType = 1
	// Release: give it back for redelivery (archived once out of deliveries).
	Release AckType = 2
	// Reject: unprocessable; archived.
	Reject AckType = 3
	// Renew: keep the lock for another lock duration (KIP-1222).
	Renew AckType = 4
)

func (t AckType) String() string {
	switch t {
	case Gap:
		return "gap"
	case Accept:
		return "accept"
	case Release:
		return "release"
	case Reject:
		return "reject"
	case Renew:
		return "renew"
	}
	return fmt.Sprintf("AckType(%d)", int8(t))
}

// Ack acknowledges the offsets [First, Last]: Types holds one type for the whole range, or one
// per offset.
type Ack struct {
	First, Last int64
	Types       []AckType
}

// typeAt returns the type for offset.
func (a Ack) typeAt(offset int64) AckType {
	if len(a.Types) == 1 {
		return a.Types[0]
	}
	return a.Types[offset-a.First]
}

// ValidateAcks checks the shape of acknowledgements without looking at any state: ranges in
// order, not overlapping, types of a known kind, one type or one per offset. It answers
// INVALID_REQUEST.
func ValidateAcks(acks []Ack) error {
	for i, a := range acks {
		if a.First < 0 || a.Last < a.First {
			return fmt.Errorf("share: acknowledgement range [%d, %d]: %w", a.First, a.Last, protocol.InvalidRequest)
		}
		if i > 0 && a.First <= acks[i-1].Last {
			return fmt.Errorf("share: acknowledgement ranges out of order or overlapping at %d: %w", a.First, protocol.InvalidRequest)
		}
		if n := int64(len(a.Types)); n != 1 && n != a.Last-a.First+1 {
			return fmt.Errorf("share: %d acknowledge types for %d offsets: %w", n, a.Last-a.First+1, protocol.InvalidRequest)
		}
		for _, t := range a.Types {
			if t < Gap || t > Renew {
				return fmt.Errorf("share: acknowledge type %d: %w", t, protocol.InvalidRequest)
			}
		}
	}
	return nil
}

// Acknowledge applies member's acknowledgements, all or nothing: every offset must be acquired by
// member (and its lock not expired at now), else nothing changes and the error wraps
// INVALID_RECORD_STATE; a malformed list wraps INVALID_REQUEST. Acks need not be sorted.
func (p *Partition) Acknowledge(now time.Time, member string, acks []Ack) error {
	acks = slices.Clone(acks)
	slices.SortFunc(acks, func(a, b Ack) int {
		switch {
		case a.First < b.First:
			return -1
		case a.First > b.First:
			return 1
		}
		return 0
	})
	if err := ValidateAcks(acks); err != nil {
		return err
	}
	p.expire(now)
	for _, a := range acks {
		if a.First < p.startOffset || a.Last >= p.EndOffset() {
			return fmt.Errorf("share: offsets [%d, %d] not in flight [%d, %d): %w",
				a.First, a.Last, p.startOffset, p.EndOffset(), protocol.InvalidRecordState)
		}
		for offset := a.First; offset <= a.Last; offset++ {
			if r := p.at(offset); r.state != Acquired || r.owner != member {
				return fmt.Errorf("share: offset %d is %s, not acquired by this member: %w", offset, r.state, protocol.InvalidRecordState)
			}
		}
	}
	deadline := now.Add(p.config.LockDuration)
	for _, a := range acks {
		for offset := a.First; offset <= a.Last; offset++ {
			r := p.at(offset)
			switch a.typeAt(offset) {
			case Accept:
				r.transition(offset, Acknowledged)
				p.acquiredCount--
				p.acknowledgedTotal++
				p.dirty = true
			case Release:
				p.release(offset, r)
			case Reject, Gap:
				r.transition(offset, Archived)
				p.acquiredCount--
				p.archivedTotal++
				p.dirty = true
			case Renew:
				r.transition(offset, Acquired)
				r.deadline = deadline
			}
		}
	}
	p.advance()
	return nil
}
