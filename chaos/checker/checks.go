package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/chaos/history"
)

// checkReads compares every record a reader or group member polled with the final log, and checks
// that readers advance one offset at a time.
func (r *run) checkReads(events []history.Event) {
	c := &r.verdict.Counts
	type cursor struct {
		process   string
		partition int32
	}
	last := map[cursor]history.Record{}
	for _, e := range events {
		if e.Type != history.OK || (e.F != history.Poll && e.F != history.GroupDrain) || (e.Topic != "" && e.Topic != r.options.Topic) {
			continue
		}
		c.Read += len(e.Records)
		for _, rec := range e.Records {
			if r.hasFinal {
				r.checkReadAgainstFinal(e, rec)
			}
			if !isReader(e.Process) {
				continue
			}
			key := cursor{e.Process, rec.Partition}
			previous, ok := last[key]
			last[key] = rec
			if !ok || rec.Offset == previous.Offset+1 {
				continue
			}
			detail := fmt.Sprintf("%s read offset %d of partition %d after %d", e.Process, rec.Offset, rec.Partition, previous.Offset)
			kind, counter := "reordered", &c.Reordered
			if rec.Offset > previous.Offset+1 {
				kind, counter = "gap", &c.Gaps
				detail += fmt.Sprintf(": skipped %d offsets", rec.Offset-previous.Offset-1)
			}
			r.add(Anomaly{Kind: kind, Partition: rec.Partition, Offset: rec.Offset, Value: rec.Value, From: e.Time, To: e.Time,
				Detail: detail, Records: []history.Record{previous, rec}}, counter)
		}
	}
}

func (r *run) checkReadAgainstFinal(e history.Event, rec history.Record) {
	records := r.final[rec.Partition]
	var got *history.Record
	if len(records) > 0 {
		if i := rec.Offset - records[0].Offset; i >= 0 && i < int64(len(records)) && records[i].Offset == rec.Offset {
			got = &records[i]
		} else if j, found := slices.BinarySearchFunc(records, rec.Offset, func(x history.Record, o int64) int { return cmp.Compare(x.Offset, o) }); found {
			got = &records[j]
		}
	}
	if got != nil && got.Value == rec.Value {
		return
	}
	detail := fmt.Sprintf("%s read %q at %d/%d", e.Process, rec.Value, rec.Partition, rec.Offset)
	records2 := []history.Record{rec}
	if got != nil {
		detail += fmt.Sprintf("; the final log holds %q there", got.Value)
		records2 = append(records2, *got)
	} else {
		detail += fmt.Sprintf("; the final log has no such offset (ends at %d)", r.finalEnd(rec.Partition))
	}
	r.add(Anomaly{Kind: "inconsistent-read", Partition: rec.Partition, Offset: rec.Offset, Value: rec.Value, From: e.Time, To: e.Time,
		Detail: detail, Records: records2}, &r.verdict.Counts.InconsistentRead)
}

// checkGroup: committed offsets never go backwards, and after healing the group has received every
// acknowledged record.
func (r *run) checkGroup(events []history.Event) {
	type opKey struct {
		process string
		op      int64
	}
	type offsetOp struct {
		invoke, complete int64
		process          string
		offset           int64
		observation      bool
	}
	invoked := map[opKey]int64{}
	byPartition := map[int32][]offsetOp{}
	delivered := map[string]bool{}
	hasGroup, drained := false, false
	for _, e := range events {
		switch e.F {
		case history.Commit, history.Committed:
			hasGroup = true
			key := opKey{e.Process, e.Op}
			if e.Type == history.Invoke {
				invoked[key] = e.Time
				continue
			}
			start, ok := invoked[key]
			if !ok || e.Type != history.OK {
				continue
			}
			for p, offset := range e.Offsets {
				byPartition[p] = append(byPartition[p], offsetOp{start, e.Time, e.Process, offset, e.F == history.Committed})
			}
		case history.Poll, history.GroupDrain:
			if e.Type != history.OK || !(strings.HasPrefix(e.Process, "member") || e.F == history.GroupDrain) {
				continue
			}
			hasGroup = true
			for _, rec := range e.Records {
				delivered[rec.Value] = true
			}
			if e.F == history.GroupDrain && e.Detail == "caught-up" {
				drained = true
			}
		}
	}
	for _, p := range sortedKeys(byPartition) {
		ops := byPartition[p]
		byComplete := slices.Clone(ops)
		slices.SortFunc(byComplete, func(a, b offsetOp) int { return cmp.Compare(a.complete, b.complete) })
		slices.SortFunc(ops, func(a, b offsetOp) int { return cmp.Compare(a.invoke, b.invoke) })
		var bound *offsetOp
		next := 0
		for _, op := range ops {
			for next < len(byComplete) && byComplete[next].complete < op.invoke {
				if bound == nil || byComplete[next].offset > bound.offset {
					bound = &byComplete[next]
				}
				next++
			}
			if !op.observation || bound == nil || op.offset >= bound.offset {
				continue
			}
			what := "committed"
			if bound.observation {
				what = "read"
			}
			r.add(Anomaly{Kind: "offset-backwards", Partition: p, Offset: op.offset, From: bound.invoke, To: op.complete,
				Detail: fmt.Sprintf("%s read committed offset %d of partition %d at %s after %s %s %d by %s", op.process, op.offset, p, seconds(op.complete), seconds(bound.complete), what, bound.offset, bound.process)},
				&r.verdict.Counts.OffsetBackwards)
		}
	}
	if !hasGroup {
		return
	}
	if !drained {
		r.add(Anomaly{Kind: "group-missed", Partition: -1, Offset: -1, From: r.end, To: r.end,
			Detail: "the group did not catch up with the log after the faults healed"}, &r.verdict.Counts.GroupMissed)
		return
	}
	for _, s := range r.sends {
		if s.outcome == history.OK && !delivered[s.value] {
			r.add(Anomaly{Kind: "group-missed", Partition: s.partition, Offset: s.offset, Value: s.value, From: s.invoke, To: s.complete,
				Detail: fmt.Sprintf("%s's acknowledged record at %d/%d never reached a group member", s.process, s.partition, s.offset)},
				&r.verdict.Counts.GroupMissed)
		}
	}
}

// checkReplicas compares the replicas' batches below the high watermark (the final read's end).
func (r *run) checkReplicas(events []history.Event) {
	replicas := map[int32]map[int32][]history.Batch{} // partition -> node -> batches
	for _, e := range events {
		if e.F != history.Replica || (e.Topic != "" && e.Topic != r.options.Topic) {
			continue
		}
		if replicas[e.Partition] == nil {
			replicas[e.Partition] = map[int32][]history.Batch{}
		}
		replicas[e.Partition][e.Node] = append(replicas[e.Partition][e.Node], e.Batches...)
	}
	if len(replicas) == 0 {
		r.verdict.Incomplete = append(r.verdict.Incomplete, "no replica digests: divergence unchecked")
		return
	}
	if !r.hasFinal {
		return
	}
	for _, p := range sortedKeys(replicas) {
		high := r.finalEnd(p)
		nodes := sortedKeys(replicas[p])
		below := func(node int32) []history.Batch {
			var out []history.Batch
			for _, b := range replicas[p][node] {
				if b.BaseOffset < high {
					out = append(out, b)
				}
			}
			return out
		}
		reference := below(nodes[0])
		for _, node := range nodes {
			batches := below(node)
			if end := batchesEnd(batches); end < high {
				r.add(Anomaly{Kind: "diverged", Partition: p, Offset: end, From: r.end, To: r.end,
					Detail: fmt.Sprintf("node %d's replica of partition %d ends at %d, below the high watermark %d", node, p, end, high)},
					&r.verdict.Counts.Diverged)
				continue
			}
			if node == nodes[0] {
				continue
			}
			if i, differ := firstDifference(reference, batches); differ {
				offset := int64(-1)
				detail := fmt.Sprintf("partition %d: node %d and node %d differ", p, nodes[0], node)
				if i < len(reference) {
					offset = reference[i].BaseOffset
					detail += fmt.Sprintf(" at node %d's batch %+v", nodes[0], reference[i])
				}
				if i < len(batches) {
					offset = batches[i].BaseOffset
					detail += fmt.Sprintf(" / node %d's batch %+v", node, batches[i])
				}
				r.add(Anomaly{Kind: "diverged", Partition: p, Offset: offset, From: r.end, To: r.end, Detail: detail}, &r.verdict.Counts.Diverged)
			}
		}
	}
}

func batchesEnd(batches []history.Batch) int64 {
	if len(batches) == 0 {
		return 0
	}
	return batches[len(batches)-1].LastOffset + 1
}

func firstDifference(a, b []history.Batch) (int, bool) {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i, true
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b)), true
	}
	return 0, false
}

// checkAvailability measures the longest interval without an acknowledged send while a majority
// of nodes was healthy, over all partitions and per partition.
func (r *run) checkAvailability() {
	var acks []int64
	perPartition := map[int32][]int64{}
	first := int64(-1)
	for _, s := range r.sends {
		if s.outcome != history.OK {
			continue
		}
		acks = append(acks, s.complete)
		perPartition[s.partition] = append(perPartition[s.partition], s.complete)
		if first < 0 || s.complete < first {
			first = s.complete
		}
	}
	if first < 0 {
		r.verdict.Incomplete = append(r.verdict.Incomplete, "no acknowledged send: availability unmeasured")
		return
	}
	end := r.healStart()
	healthy := r.healthyIntervals(first, end)
	limit := int64(r.options.UnavailableLimit)
	measure := func(times []int64, partition int32) (longest, from int64) {
		slices.Sort(times)
		for _, in := range healthy {
			previous := in[0]
			i, _ := slices.BinarySearch(times, in[0])
			for ; ; i++ {
				next := in[1]
				if i < len(times) && times[i] < in[1] {
					next = times[i]
				}
				if gap := next - previous; gap > longest {
					longest, from = gap, previous
				}
				if gap := next - previous; limit > 0 && gap > limit {
					r.add(Anomaly{Kind: "unavailable", Partition: partition, Offset: -1, From: previous, To: next,
						Detail: fmt.Sprintf("no acknowledged send%s for %v from %s with a healthy majority", partitionText(partition), time.Duration(gap).Round(time.Millisecond), seconds(previous))},
						&r.verdict.Counts.Unavailable)
				}
				if next == in[1] {
					break
				}
				previous = next
			}
		}
		return longest, from
	}
	longest, from := measure(acks, -1)
	r.verdict.LongestUnavailable, r.verdict.LongestUnavailableFrom = time.Duration(longest), from
	for _, p := range sortedKeys(perPartition) {
		if longest, from := measure(perPartition[p], p); time.Duration(longest) > r.verdict.LongestPartitionUnavailable {
			r.verdict.LongestPartitionUnavailable, r.verdict.LongestPartition, r.verdict.LongestPartitionFrom = time.Duration(longest), p, from
		}
	}
}

func partitionText(p int32) string {
	if p < 0 {
		return ""
	}
	return fmt.Sprintf(" to partition %d", p)
}

// healStart is when the faults stopped being injected (the "heal" phase), or the end.
func (r *run) healStart() int64 {
	if r.healAt >= 0 {
		return r.healAt
	}
	return r.end
}

// healthyIntervals returns the intervals within [from, to) during which the nodes marked by
// active faults leave a majority unmarked.
func (r *run) healthyIntervals(from, to int64) [][2]int64 {
	boundaries := []int64{from, to}
	for _, f := range r.faults {
		boundaries = append(boundaries, f.start)
		if f.end >= 0 {
			boundaries = append(boundaries, f.end)
		}
	}
	slices.Sort(boundaries)
	boundaries = slices.Compact(boundaries)
	majority := r.options.Nodes/2 + 1
	var out [][2]int64
	for i := 0; i+1 < len(boundaries); i++ {
		a, b := boundaries[i], boundaries[i+1]
		if a < from || b > to || a >= b {
			continue
		}
		unhealthy := map[int32]bool{}
		for _, f := range r.faults {
			if f.start <= a && (f.end < 0 || f.end >= b) {
				for _, n := range f.nodes {
					unhealthy[n] = true
				}
			}
		}
		if r.options.Nodes-len(unhealthy) < majority {
			continue
		}
		if n := len(out); n > 0 && out[n-1][1] == a {
			out[n-1][1] = b
		} else {
			out = append(out, [2]int64{a, b})
		}
	}
	return out
}
