package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/chaos/history"
)

const topic = "chaos"

// builder makes synthetic histories; times are in milliseconds.
type builder struct {
	events []history.Event
	op     int64
}

func rec(p int32, o int64, v string) history.Record {
	return history.Record{Partition: p, Offset: o, Value: v}
}

func ms(v int64) int64 { return v * int64(time.Millisecond) }

func (b *builder) add(e history.Event) { b.events = append(b.events, e) }

func (b *builder) send(process string, idempotent bool, value string, p int32, o int64, invoke, complete int64) {
	b.op++
	b.add(history.Event{Time: ms(invoke), Process: process, Type: history.Invoke, F: history.Send, Op: b.op, Topic: topic, Value: value, Idempotent: idempotent})
	b.add(history.Event{Time: ms(complete), Process: process, Type: history.OK, F: history.Send, Op: b.op, Topic: topic, Partition: p, Offset: o, Value: value})
}

func (b *builder) failedSend(process, value string, invoke, complete int64) {
	b.op++
	b.add(history.Event{Time: ms(invoke), Process: process, Type: history.Invoke, F: history.Send, Op: b.op, Topic: topic, Value: value})
	b.add(history.Event{Time: ms(complete), Process: process, Type: history.Info, F: history.Send, Op: b.op, Topic: topic, Error: "timeout"})
}

func (b *builder) final(at int64, p int32, values ...string) {
	var records []history.Record
	for i, v := range values {
		records = append(records, history.Record{Partition: p, Offset: int64(i), Value: v})
	}
	b.add(history.Event{Time: ms(at), Process: "final", Type: history.OK, F: history.FinalRead, Topic: topic, Records: records})
}

func (b *builder) poll(process string, at int64, records ...history.Record) {
	b.add(history.Event{Time: ms(at), Process: process, Type: history.OK, F: history.Poll, Topic: topic, Records: records})
}

func (b *builder) offsets(f, process string, invoke, complete int64, offsets map[int32]int64) {
	b.op++
	b.add(history.Event{Time: ms(invoke), Process: process, Type: history.Invoke, F: f, Op: b.op})
	b.add(history.Event{Time: ms(complete), Process: process, Type: history.OK, F: f, Op: b.op, Offsets: offsets})
}

func (b *builder) fault(name string, nodes []int32, start, end int64) {
	b.op++
	b.add(history.Event{Time: ms(start), Process: "nemesis", F: history.FaultStart, Op: b.op, Fault: name, Nodes: nodes})
	b.add(history.Event{Time: ms(end), Process: "nemesis", F: history.FaultEnd, Op: b.op, Fault: name, Nodes: nodes})
}

func (b *builder) replica(node, p int32, batches ...history.Batch) {
	b.add(history.Event{Time: ms(100_000), Process: "checker", F: history.Replica, Topic: topic, Node: node, Partition: p, Batches: batches})
}

func (b *builder) check() Verdict {
	return Check(b.events, Options{Nodes: 3, Topic: topic, UnavailableLimit: 3 * time.Second})
}

// healthy is a small valid history: two partitions, sends, reads, a group, faults and replicas.
func healthy() *builder {
	b := &builder{}
	b.add(history.Event{Time: 0, Process: "runner", F: history.Phase, Detail: "faults"})
	b.send("producer-1", true, "a", 0, 0, 10, 20)
	b.send("producer-2", false, "b", 1, 0, 15, 30)
	b.send("producer-1", true, "c", 0, 1, 900, 1000)
	b.fault("kill", []int32{2}, 1100, 2000)
	b.send("producer-2", false, "d", 1, 1, 1500, 2500)
	b.failedSend("producer-1", "lost-but-unacknowledged", 2600, 3000)
	b.send("producer-1", true, "e", 0, 2, 3100, 3200)
	b.poll("reader-1", 3300, rec(0, 0, "a"), rec(0, 1, "c"), rec(1, 0, "b"))
	b.poll("reader-1", 3400, rec(0, 2, "e"), rec(1, 1, "d"))
	b.poll("member-1", 3300, rec(0, 0, "a"), rec(0, 1, "c"))
	b.offsets(history.Commit, "member-1", 3350, 3360, map[int32]int64{0: 2})
	b.offsets(history.Committed, "monitor", 3370, 3380, map[int32]int64{0: 2})
	b.add(history.Event{Time: ms(3500), Process: "runner", F: history.Phase, Detail: "heal"})
	b.add(history.Event{Time: ms(3600), Process: "drain", Type: history.OK, F: history.GroupDrain, Detail: "caught-up",
		Records: []history.Record{rec(0, 2, "e"), rec(1, 0, "b"), rec(1, 1, "d")}})
	b.final(4000, 0, "a", "c", "e")
	b.final(4000, 1, "b", "d")
	for node := int32(1); node <= 3; node++ {
		b.replica(node, 0, history.Batch{BaseOffset: 0, LastOffset: 2, Length: 100, LeaderEpoch: 1, CRC: 7})
		b.replica(node, 1, history.Batch{BaseOffset: 0, LastOffset: 0, Length: 60, LeaderEpoch: 1, CRC: 8},
			history.Batch{BaseOffset: 1, LastOffset: 1, Length: 60, LeaderEpoch: 2, CRC: 9})
	}
	return b
}

func expect(t *testing.T, v Verdict, kind string, count int, field func(Counts) int) {
	t.Helper()
	if got := field(v.Counts); got != count {
		t.Fatalf("%s: counted %d, want %d\n%s", kind, got, count, summary(v))
	}
	if count > 0 {
		if v.Valid {
			t.Fatalf("verdict valid despite %s", kind)
		}
		found := false
		for _, a := range v.Anomalies {
			found = found || a.Kind == kind
		}
		if !found {
			t.Fatalf("no %s anomaly listed\n%s", kind, summary(v))
		}
	}
}

func summary(v Verdict) string {
	var s strings.Builder
	v.WriteSummary(&s)
	return s.String()
}

func TestHealthyHistoryIsValid(t *testing.T) {
	v := healthy().check()
	if !v.Valid || len(v.Incomplete) > 0 {
		t.Fatalf("healthy history judged:\n%s", summary(v))
	}
	if v.Counts.Acknowledged != 5 || v.Counts.UnknownSends != 1 || v.Counts.Faults != 1 || v.Counts.FinalRecords != 5 {
		t.Fatalf("counts %+v", v.Counts)
	}
	// The longest gap between acknowledgements with a healthy majority: 1000 ms -> 2500 ms.
	if v.LongestUnavailable != 1500*time.Millisecond || v.LongestUnavailableFrom != ms(1000) {
		t.Fatalf("longest unavailability %v from %d", v.LongestUnavailable, v.LongestUnavailableFrom)
	}
}

func TestLostAcknowledgedRecord(t *testing.T) {
	b := healthy()
	b.send("producer-1", true, "f", 0, 3, 3250, 3260) // acknowledged, never in the final log
	v := b.check()
	expect(t, v, "lost", 1, func(c Counts) int { return c.Lost })
	if a := v.Anomalies[0]; a.Offset != 3 || a.Value != "f" || !strings.Contains(a.Detail, "partition ends at 3") {
		t.Fatalf("anomaly %+v", a)
	}
}

func TestLostRecordOverwrittenListsTheFaultsAround(t *testing.T) {
	b := healthy()
	b.events = b.events[:len(b.events)-6] // drop the replicas
	b.fault("partition isolate n1", []int32{1}, 1800, 1900)
	for i := range b.events {
		if e := &b.events[i]; e.F == history.FinalRead && e.Records[0].Partition == 1 {
			e.Records[1].Value = "x"
		}
	}
	b.send("producer-9", false, "x", 1, 5, 1700, 1750) // "x" was sent (so not phantom), acked elsewhere
	v := b.check()
	expect(t, v, "lost", 2, func(c Counts) int { return c.Lost }) // "d" overwritten, "x" acked at 5
	var lostD Anomaly
	for _, a := range v.Anomalies {
		if a.Value == "d" && a.Kind == "lost" {
			lostD = a
		}
	}
	if !strings.Contains(lostD.Detail, `holds "x"`) || len(lostD.Faults) != 2 {
		t.Fatalf("anomaly %+v", lostD)
	}
}

func TestDuplicatedIdempotentRecord(t *testing.T) {
	b := healthy()
	b.final(4000, 2, "a") // "a" (idempotent) also in partition 2
	expect(t, b.check(), "duplicated", 1, func(c Counts) int { return c.Duplicated })

	b = healthy()
	b.final(4000, 2, "b") // "b" is from a non-idempotent producer: allowed
	v := b.check()
	if v.Counts.Duplicated != 0 || v.Counts.DuplicatedPlain != 1 {
		t.Fatalf("counts %+v", v.Counts)
	}
}

func TestPhantomAndGap(t *testing.T) {
	b := healthy()
	b.add(history.Event{Time: ms(4000), Process: "final", Type: history.OK, F: history.FinalRead, Topic: topic,
		Records: []history.Record{rec(2, 0, "a2"), rec(2, 2, "a3")}})
	b.send("producer-1", true, "a2", 2, 0, 100, 200)
	v := b.check()
	expect(t, v, "gap", 1, func(c Counts) int { return c.Gaps })
	expect(t, v, "phantom", 1, func(c Counts) int { return c.Phantom })
}

func TestRealTimeOrderOfSends(t *testing.T) {
	b := healthy()
	// "late" was invoked after "c" (offset 1) was acknowledged, yet claims offset 0 of partition 0.
	b.send("producer-3", true, "late", 0, 0, 1200, 1300)
	v := b.check()
	expect(t, v, "reordered", 1, func(c Counts) int { return c.Reordered })
}

func TestReaderSkipsAndGoesBackwards(t *testing.T) {
	b := healthy()
	b.poll("reader-2", 3300, rec(0, 0, "a"), rec(0, 2, "e"), rec(0, 1, "c"))
	v := b.check()
	expect(t, v, "gap", 1, func(c Counts) int { return c.Gaps })
	expect(t, v, "reordered", 1, func(c Counts) int { return c.Reordered })
}

func TestInconsistentRead(t *testing.T) {
	b := healthy()
	b.poll("member-2", 3300, rec(0, 1, "truncated"), rec(0, 7, "beyond"))
	expect(t, b.check(), "inconsistent-read", 2, func(c Counts) int { return c.InconsistentRead })
}

func TestDivergedReplicas(t *testing.T) {
	b := healthy()
	b.replica(2, 0) // nothing more
	for i := range b.events {
		if e := &b.events[i]; e.F == history.Replica && e.Node == 3 && e.Partition == 1 {
			e.Batches[1].LeaderEpoch = 3 // same offsets, another epoch: not byte-identical
		}
		if e := &b.events[i]; e.F == history.Replica && e.Node == 2 && e.Partition == 0 && len(e.Batches) > 0 {
			e.Batches = e.Batches[:0] // node 2 lacks partition 0's batches
		}
	}
	v := b.check()
	expect(t, v, "diverged", 2, func(c Counts) int { return c.Diverged })
	// Batches above the high watermark do not count.
	b = healthy()
	b.replica(1, 0, history.Batch{BaseOffset: 3, LastOffset: 3, Length: 10, LeaderEpoch: 4, CRC: 1})
	if v := b.check(); !v.Valid {
		t.Fatalf("a tail above the high watermark judged:\n%s", summary(v))
	}
}

func TestGroupOffsetBackwardsAndMissed(t *testing.T) {
	b := healthy()
	b.offsets(history.Committed, "monitor", 3390, 3395, map[int32]int64{0: 1})
	expect(t, b.check(), "offset-backwards", 1, func(c Counts) int { return c.OffsetBackwards })

	b = healthy()
	b.send("producer-1", true, "g", 1, 2, 3210, 3220)
	b.final(4000, 1, "", "", "g") // offsets 0 and 1 come from the first final read event
	for i := range b.events {
		if e := &b.events[i]; e.F == history.FinalRead && len(e.Records) == 3 && e.Records[2].Value == "g" {
			e.Records = e.Records[2:]
		}
		if e := &b.events[i]; e.F == history.Replica && e.Partition == 1 {
			e.Batches = append(e.Batches, history.Batch{BaseOffset: 2, LastOffset: 2, Length: 60, LeaderEpoch: 2, CRC: 10})
		}
	}
	expect(t, b.check(), "group-missed", 1, func(c Counts) int { return c.GroupMissed })
}

func TestUnavailableWithHealthyMajority(t *testing.T) {
	b := healthy()
	// 5.1 s without acknowledgements (3.2 s -> 8.3 s), only one node faulty: unavailable.
	b.send("producer-1", true, "h", 0, 3, 8200, 8300)
	b.add(history.Event{Time: ms(8400), Process: "final", Type: history.OK, F: history.FinalRead, Topic: topic, Records: []history.Record{rec(0, 3, "h")}})
	b.fault("kill", []int32{1}, 3250, 8000)
	for i := range b.events {
		if e := &b.events[i]; e.F == history.Phase && e.Detail == "heal" {
			e.Time = ms(9000)
		}
	}
	v := b.check()
	if v.LongestUnavailable != 5100*time.Millisecond {
		t.Fatalf("longest %v\n%s", v.LongestUnavailable, summary(v))
	}
	if v.Counts.Unavailable == 0 {
		t.Fatalf("not flagged\n%s", summary(v))
	}
	// The same gap while two of three nodes were down is not counted.
	b.fault("kill-majority", []int32{2, 3}, 3210, 8100)
	if v := b.check(); v.LongestUnavailable >= 3*time.Second {
		t.Fatalf("longest %v counted with a majority down\n%s", v.LongestUnavailable, summary(v))
	}
}

func TestMissingPartsAreReportedIncomplete(t *testing.T) {
	b := &builder{}
	b.send("producer-1", true, "a", 0, 0, 10, 20)
	v := b.check()
	if len(v.Incomplete) != 2 {
		t.Fatalf("incomplete %v", v.Incomplete)
	}
}
