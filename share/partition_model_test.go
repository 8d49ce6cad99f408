package share

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/protocol"
)

// model is the simple version Partition is checked against: a map from offset to record, with
// the start found by scanning.
type model struct {
	config   Config
	start    int64
	end      int64 // first offset never fetched
	records  map[int64]*record
	logEnd   int64
	logStart int64
}

func (m *model) expire(now time.Time) {
	for o := m.start; o < m.end; o++ {
		if r := m.records[o]; r.state == Acquired && !r.deadline.After(now) {
			m.release(r)
		}
	}
}

func (m *model) release(r *record) {
	r.owner, r.deadline = "", time.Time{}
	if int(r.deliveryCount) >= m.config.DeliveryCountLimit {
		r.state = Archived
	} else {
		r.state = Available
	}
}

func (m *model) advance() {
	for m.start < m.end && m.records[m.start].state.terminal() {
		delete(m.records, m.start)
		m.start++
	}
}

func (m *model) nextFetch(now time.Time) (int64, bool) {
	m.expire(now)
	m.advance()
	for o := m.start; o < m.end; o++ {
		if m.records[o].state == Available {
			return o, true
		}
	}
	return m.end, m.end-m.start < int64(m.config.MaxInFlight)
}

func (m *model) acquire(now time.Time, member string, batches []Batch, maxRecords int, strict bool) []AcquiredRange {
	m.expire(now)
	var out []AcquiredRange
	n := 0
	for _, b := range batches {
		for o := max(b.First, m.start); o <= b.Last; o++ {
			if strict && n >= maxRecords {
				m.advance()
				return out
			}
			if o == m.end {
				if m.end-m.start >= int64(m.config.MaxInFlight) {
					m.advance()
					return out
				}
				m.records[o] = &record{}
				m.end++
			}
			r := m.records[o]
			if r.state != Available {
				continue
			}
			r.state, r.owner, r.deadline = Acquired, member, now.Add(m.config.LockDuration)
			r.deliveryCount++
			n++
			if k := len(out); k > 0 && out[k-1].Last+1 == o && out[k-1].DeliveryCount == r.deliveryCount {
				out[k-1].Last = o
			} else {
				out = append(out, AcquiredRange{o, o, r.deliveryCount})
			}
		}
		if n >= maxRecords {
			break
		}
	}
	m.advance()
	return out
}

// acknowledge returns the error class the partition must answer.
func (m *model) acknowledge(now time.Time, member string, a Ack) protocol.ErrorCode {
	if ValidateAcks([]Ack{a}) != nil {
		return protocol.InvalidRequest
	}
	m.expire(now)
	m.advance()
	for o := a.First; o <= a.Last; o++ {
		r, ok := m.records[o]
		if !ok || o < m.start || o >= m.end || r.state != Acquired || r.owner != member {
			return protocol.InvalidRecordState
		}
	}
	for o := a.First; o <= a.Last; o++ {
		r := m.records[o]
		switch a.typeAt(o) {
		case Accept:
			r.state, r.owner, r.deadline = Acknowledged, "", time.Time{}
		case Release:
			m.release(r)
		case Reject, Gap:
			r.state, r.owner, r.deadline = Archived, "", time.Time{}
		case Renew:
			r.deadline = now.Add(m.config.LockDuration)
		}
	}
	m.advance()
	return protocol.None
}

func (m *model) releaseMember(now time.Time, member string) {
	m.expire(now)
	for o := m.start; o < m.end; o++ {
		if r := m.records[o]; r.state == Acquired && r.owner == member {
			m.release(r)
		}
	}
	m.advance()
}

// restart is what a restore from a checkpoint does: locks are gone, as if they had timed out.
func (m *model) restart() {
	for o := m.start; o < m.end; o++ {
		if r := m.records[o]; r.state == Acquired {
			m.release(r)
		}
	}
	m.advance()
	for m.end > m.start && m.records[m.end-1].state == Available && m.records[m.end-1].deliveryCount == 0 {
		m.end--
		delete(m.records, m.end)
	}
}

func (m *model) compare(p *Partition) error {
	if p.StartOffset() != m.start || p.EndOffset() != m.end {
		return fmt.Errorf("window [%d, %d), model [%d, %d)", p.StartOffset(), p.EndOffset(), m.start, m.end)
	}
	for o := m.start; o < m.end; o++ {
		got, want := p.records[o-p.startOffset], *m.records[o]
		if got.state != want.state || got.deliveryCount != want.deliveryCount || got.owner != want.owner || !got.deadline.Equal(want.deadline) {
			return fmt.Errorf("offset %d: %+v, model %+v", o, got, want)
		}
	}
	return nil
}

// logBatches returns the log's batches (4 records each, aligned) from the one holding offset,
// at most n of them, below the log end.
func (m *model) logBatches(offset int64, n int) []Batch {
	var out []Batch
	for b := offset - offset%4; b < m.logEnd && len(out) < n; b += 4 {
		out = append(out, Batch{First: max(b, m.logStart), Last: min(b+3, m.logEnd-1)})
	}
	return out
}

func TestPartitionAgainstModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	cfg := Config{LockDuration: time.Duration(1+rng.IntN(5)) * time.Second, DeliveryCountLimit: 1 + rng.IntN(4), MaxInFlight: 1 + rng.IntN(40)}
	p := NewPartition(cfg, 0)
	m := &model{config: cfg, records: map[int64]*record{}}
	members := []string{"a", "b", "c"}
	now := t0
	for step := range 3000 {
		var op string
		switch k := rng.IntN(100); {
		case k < 15:
			op = "produce"
			m.logEnd += int64(rng.IntN(10))
		case k < 45:
			member := members[rng.IntN(len(members))]
			maxRecords, strict := 1+rng.IntN(12), rng.IntN(4) == 0
			op = fmt.Sprintf("fetch %s max %d strict %v", member, maxRecords, strict)
			offset, ok := p.NextFetchOffset(now)
			wantOffset, wantOK := m.nextFetch(now)
			if ok != wantOK || ok && offset != wantOffset {
				t.Fatalf("step %d %s: next fetch %d %v, model %d %v", step, op, offset, ok, wantOffset, wantOK)
			}
			if !ok {
				break
			}
			read := m.logBatches(offset, 1+rng.IntN(4))
			got := p.Acquire(now, member, read, maxRecords, strict)
			want := m.acquire(now, member, read, maxRecords, strict)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("step %d %s: acquired %v, model %v", step, op, got, want)
			}
		case k < 75:
			member := members[rng.IntN(len(members))]
			if rng.IntN(4) > 0 {
				// Mostly acknowledge something the member holds.
				for o := m.start; o < m.end; o++ {
					if r := m.records[o]; r.state == Acquired && r.owner != member && rng.IntN(3) > 0 {
						member = r.owner
						break
					}
				}
			}
			first := m.start - 1 + int64(rng.IntN(int(m.end-m.start)+3))
			last := first + int64(rng.IntN(4))
			types := []AckType{AckType(rng.IntN(5))}
			if rng.IntN(3) == 0 {
				types = nil
				for range last - first + 1 {
					types = append(types, AckType(rng.IntN(5)))
				}
			}
			a := Ack{First: first, Last: last, Types: types}
			op = fmt.Sprintf("ack %s %+v", member, a)
			err := p.Acknowledge(now, member, []Ack{a})
			want := m.acknowledge(now, member, a)
			if want == protocol.None && err != nil || want != protocol.None && !errors.Is(err, want) {
				t.Fatalf("step %d %s: error %v, model %s", step, op, err, want.Name)
			}
		case k < 80:
			member := members[rng.IntN(len(members))]
			op = "release " + member
			p.ReleaseMember(now, member)
			m.releaseMember(now, member)
		case k < 95:
			d := time.Duration(rng.IntN(3000)) * time.Millisecond
			op = fmt.Sprint("advance ", d)
			now = now.Add(d)
			p.Expire(now)
			m.expire(now)
			m.advance()
		case k < 97:
			op = "retention"
			if m.logEnd > m.logStart {
				m.logStart += int64(rng.IntN(int(m.logEnd-m.logStart) + 1))
			}
			p.AdvanceStart(m.logStart)
			if m.logStart > m.start {
				for o := m.start; o < min(m.logStart, m.end); o++ {
					delete(m.records, o)
				}
				m.start = m.logStart
				m.end = max(m.end, m.start)
				m.advance()
			}
		default:
			op = "restart"
			restored, err := Restore(cfg, p.Checkpoint())
			if err != nil {
				t.Fatalf("step %d: restore: %v", step, err)
			}
			p = restored
			m.restart()
		}
		checkPartition(t, p)
		if err := m.compare(p); err != nil {
			t.Fatalf("seed %d step %d after %s: %v", seed, step, op, err)
		}
	}
}
