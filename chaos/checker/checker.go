package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/chaos/history"
)

// Options say what the run promised.
type Options struct {
	// Nodes is the cluster size; a majority is Nodes/2+1.
	Nodes int
	// Topic is the topic the producers wrote and the final read covers.
	Topic string
	// UnavailableLimit: a longer interval without acknowledged sends while a majority was healthy
	// is an anomaly (0: only measured).
	UnavailableLimit time.Duration
	// MaxPerKind bounds the anomalies listed per kind (all are counted); 0 means 20.
	MaxPerKind int
}

// Anomaly is one violation.
type Anomaly struct {
	Kind      string           `json:"kind"`
	Partition int32            `json:"partition"`
	Offset    int64            `json:"offset"`
	Value     string           `json:"value,omitempty"`
	Detail    string           `json:"detail"`
	From      int64            `json:"from"` // ns since the start: when it happened, or began
	To        int64            `json:"to"`
	Records   []history.Record `json:"records,omitempty"`
	Faults    []string         `json:"faults,omitempty"` // active between From and To (+10 s)
}

// Counts are the run's figures.
type Counts struct {
	Operations      int `json:"operations"`
	Sends           int `json:"sends"`
	Acknowledged    int `json:"acknowledged"`
	AckedIdempotent int `json:"acknowledgedIdempotent"`
	FailedSends     int `json:"failedSends"`
	UnknownSends    int `json:"indeterminateSends"`
	Read            int `json:"recordsRead"`
	FinalRecords    int `json:"finalRecords"`
	Commits         int `json:"commits"`
	Faults          int `json:"faults"`

	Lost             int `json:"lost"`
	Duplicated       int `json:"duplicated"`
	DuplicatedPlain  int `json:"duplicatedNonIdempotent"` // allowed: retries without idempotence
	Phantom          int `json:"phantom"`
	Gaps             int `json:"gaps"`
	Reordered        int `json:"reordered"`
	InconsistentRead int `json:"inconsistentReads"`
	Diverged         int `json:"diverged"`
	OffsetBackwards  int `json:"offsetsBackwards"`
	GroupMissed      int `json:"groupMissed"`
	Unavailable      int `json:"unavailable"`
}

// Verdict is the checker's answer.
type Verdict struct {
	Valid  bool   `json:"valid"`
	Counts Counts `json:"counts"`
	// LongestUnavailable is the longest interval with a healthy majority and no acknowledged send
	// on any partition; LongestPartitionUnavailable the same for a single partition.
	LongestUnavailable          time.Duration `json:"longestUnavailableNs"`
	LongestUnavailableFrom      int64         `json:"longestUnavailableFrom"`
	LongestPartitionUnavailable time.Duration `json:"longestPartitionUnavailableNs"`
	LongestPartition            int32         `json:"longestPartition"`
	LongestPartitionFrom        int64         `json:"longestPartitionFrom"`
	// Incomplete names checks that could not run (no final read, no replica digests, ...).
	Incomplete []string  `json:"incomplete,omitempty"`
	Anomalies  []Anomaly `json:"anomalies"`
}

type send struct {
	process    string
	invoke     int64
	complete   int64
	outcome    history.Type
	value      string
	idempotent bool
	partition  int32
	offset     int64
}

type fault struct {
	name       string
	start, end int64 // end -1: never ended
	nodes      []int32
}

// run holds the history digested for the checks.
type run struct {
	options  Options
	verdict  *Verdict
	perKind  map[string]int
	sends    []*send
	byValue  map[string]*send
	faults   []fault
	final    map[int32][]history.Record // partition -> records in read order
	hasFinal bool
	end      int64 // last event time
	healAt   int64 // when the heal phase began, -1 if it never did
}

// Check judges a history.
func Check(events []history.Event, options Options) Verdict {
	if options.MaxPerKind <= 0 {
		options.MaxPerKind = 20
	}
	verdict := &Verdict{}
	r := &run{options: options, verdict: verdict, perKind: map[string]int{}, byValue: map[string]*send{}, final: map[int32][]history.Record{}, healAt: -1}
	r.digest(events)
	r.checkFinal()
	r.checkSends()
	r.checkRealTimeOrder()
	r.checkReads(events)
	r.checkGroup(events)
	r.checkReplicas(events)
	r.checkAvailability()
	c := verdict.Counts
	verdict.Valid = c.Lost+c.Duplicated+c.Phantom+c.Gaps+c.Reordered+c.InconsistentRead+c.Diverged+c.OffsetBackwards+c.GroupMissed+c.Unavailable == 0
	return *verdict
}

// digest pairs operations and collects faults and the final read.
func (r *run) digest(events []history.Event) {
	type opKey struct {
		process string
		op      int64
	}
	invoked := map[opKey]*send{}
	faultIndex := map[int64]int{}
	for _, e := range events {
		r.end = max(r.end, e.Time)
		if e.Type == history.Invoke {
			r.verdict.Counts.Operations++
		}
		switch e.F {
		case history.Send:
			key := opKey{e.Process, e.Op}
			if e.Type == history.Invoke {
				s := &send{process: e.Process, invoke: e.Time, complete: -1, value: e.Value, idempotent: e.Idempotent, partition: -1, offset: -1}
				invoked[key] = s
				r.sends = append(r.sends, s)
				r.byValue[e.Value] = s
				continue
			}
			s := invoked[key]
			if s == nil {
				continue
			}
			s.complete, s.outcome = e.Time, e.Type
			if e.Type == history.OK {
				s.partition, s.offset = e.Partition, e.Offset
			}
		case history.FaultStart:
			faultIndex[e.Op] = len(r.faults)
			r.faults = append(r.faults, fault{name: faultName(e), start: e.Time, end: -1, nodes: e.Nodes})
		case history.FaultEnd:
			if i, ok := faultIndex[e.Op]; ok {
				r.faults[i].end = e.Time
			}
		case history.FinalRead:
			if e.Type == history.OK && e.Topic == r.options.Topic {
				r.hasFinal = true
				for _, rec := range e.Records {
					r.final[rec.Partition] = append(r.final[rec.Partition], rec)
				}
			}
		case history.Phase:
			if e.Detail == "heal" && r.healAt < 0 {
				r.healAt = e.Time
			}
		case history.Commit:
			if e.Type == history.OK {
				r.verdict.Counts.Commits++
			}
		}
	}
	c := &r.verdict.Counts
	c.Faults = len(r.faults)
	for _, s := range r.sends {
		c.Sends++
		switch s.outcome {
		case history.OK:
			c.Acknowledged++
			if s.idempotent {
				c.AckedIdempotent++
			}
		case history.Fail:
			c.FailedSends++
		default:
			c.UnknownSends++
		}
	}
}

func faultName(e history.Event) string {
	if e.Detail != "" {
		return e.Fault + " " + e.Detail
	}
	return e.Fault
}

// add records an anomaly, listing the faults around it.
func (r *run) add(a Anomaly, counter *int) {
	*counter++
	r.perKind[a.Kind]++
	if r.perKind[a.Kind] > r.options.MaxPerKind {
		return
	}
	a.Faults = r.faultsDuring(a.From, a.To+int64(10*time.Second))
	r.verdict.Anomalies = append(r.verdict.Anomalies, a)
}

func (r *run) faultsDuring(from, to int64) []string {
	var out []string
	for _, f := range r.faults {
		end := f.end
		if end < 0 {
			end = r.end
		}
		if f.start <= to && end >= from {
			out = append(out, fmt.Sprintf("%s [%s, %s]", f.name, seconds(f.start), seconds(end)))
		}
	}
	return out
}

func seconds(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }

// checkFinal checks that each partition's final read is dense from its first offset and that
// every value in it was sent, by an idempotent producer at most once.
func (r *run) checkFinal() {
	if !r.hasFinal {
		r.verdict.Incomplete = append(r.verdict.Incomplete, "no final read: lost, duplicates and gaps unchecked")
		return
	}
	c := &r.verdict.Counts
	seen := map[string][]history.Record{}
	for _, p := range sortedKeys(r.final) {
		records := r.final[p]
		c.FinalRecords += len(records)
		for i, rec := range records {
			if i > 0 && rec.Offset != records[i-1].Offset+1 {
				kind, counter := "gap", &c.Gaps
				if rec.Offset <= records[i-1].Offset {
					kind, counter = "reordered", &c.Reordered
				}
				r.add(Anomaly{Kind: kind, Partition: p, Offset: rec.Offset, Value: rec.Value, From: r.end, To: r.end,
					Detail:  fmt.Sprintf("final read of partition %d: offset %d follows %d", p, rec.Offset, records[i-1].Offset),
					Records: []history.Record{records[i-1], rec}}, counter)
			}
			seen[rec.Value] = append(seen[rec.Value], rec)
		}
	}
	for _, value := range sortedKeys(seen) {
		at := seen[value]
		s := r.byValue[value]
		if s == nil {
			r.add(Anomaly{Kind: "phantom", Partition: at[0].Partition, Offset: at[0].Offset, Value: value, From: r.end, To: r.end,
				Detail: "a value no producer sent", Records: at}, &c.Phantom)
			continue
		}
		if len(at) < 2 {
			continue
		}
		if !s.idempotent {
			c.DuplicatedPlain++
			continue
		}
		r.add(Anomaly{Kind: "duplicated", Partition: at[0].Partition, Offset: at[1].Offset, Value: value, From: s.invoke, To: max(s.complete, s.invoke),
			Detail: fmt.Sprintf("idempotent %s's record stored %d times", s.process, len(at)), Records: at}, &c.Duplicated)
	}
}

// checkSends finds acknowledged sends missing from the final read.
func (r *run) checkSends() {
	if !r.hasFinal {
		return
	}
	at := map[int32]map[int64]string{}
	where := map[string]history.Record{}
	for p, records := range r.final {
		at[p] = make(map[int64]string, len(records))
		for _, rec := range records {
			at[p][rec.Offset] = rec.Value
			where[rec.Value] = rec
		}
	}
	for _, s := range r.sends {
		if s.outcome != history.OK {
			continue
		}
		if got, ok := at[s.partition][s.offset]; ok && got == s.value {
			continue
		}
		detail := fmt.Sprintf("%s's send acknowledged at %d/%d is not in the final log", s.process, s.partition, s.offset)
		records := []history.Record{{Partition: s.partition, Offset: s.offset, Value: s.value}}
		if got, ok := at[s.partition][s.offset]; ok {
			detail += fmt.Sprintf("; that offset holds %q", got)
			records = append(records, history.Record{Partition: s.partition, Offset: s.offset, Value: got})
		} else if n := len(r.final[s.partition]); n == 0 || s.offset > r.final[s.partition][n-1].Offset {
			detail += fmt.Sprintf("; the partition ends at %d", r.finalEnd(s.partition))
		}
		if elsewhere, ok := where[s.value]; ok {
			detail += fmt.Sprintf("; the value is at %d/%d", elsewhere.Partition, elsewhere.Offset)
			records = append(records, elsewhere)
		}
		r.add(Anomaly{Kind: "lost", Partition: s.partition, Offset: s.offset, Value: s.value, From: s.invoke, To: s.complete,
			Detail: detail, Records: records}, &r.verdict.Counts.Lost)
	}
}

// finalEnd is the offset after the last record of the final read of partition p.
func (r *run) finalEnd(p int32) int64 {
	records := r.final[p]
	if len(records) == 0 {
		return 0
	}
	return records[len(records)-1].Offset + 1
}

// checkRealTimeOrder: on one partition, a send invoked after another was acknowledged must get a
// higher offset.
func (r *run) checkRealTimeOrder() {
	byPartition := map[int32][]*send{}
	for _, s := range r.sends {
		if s.outcome == history.OK {
			byPartition[s.partition] = append(byPartition[s.partition], s)
		}
	}
	for _, p := range sortedKeys(byPartition) {
		sends := byPartition[p]
		byInvoke := slices.Clone(sends)
		slices.SortFunc(byInvoke, func(a, b *send) int { return cmp.Compare(a.invoke, b.invoke) })
		byComplete := sends
		slices.SortFunc(byComplete, func(a, b *send) int { return cmp.Compare(a.complete, b.complete) })
		var highest *send
		next := 0
		for _, s := range byInvoke {
			for next < len(byComplete) && byComplete[next].complete < s.invoke {
				if highest == nil || byComplete[next].offset > highest.offset {
					highest = byComplete[next]
				}
				next++
			}
			if highest != nil && s.offset <= highest.offset {
				r.add(Anomaly{Kind: "reordered", Partition: p, Offset: s.offset, Value: s.value, From: highest.invoke, To: s.complete,
					Detail:  fmt.Sprintf("%s's send invoked at %s got offset %d, below %d acknowledged at %s to %s", s.process, seconds(s.invoke), s.offset, highest.offset, seconds(highest.complete), highest.process),
					Records: []history.Record{{Partition: p, Offset: highest.offset, Value: highest.value}, {Partition: p, Offset: s.offset, Value: s.value}}},
					&r.verdict.Counts.Reordered)
			}
		}
	}
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// isReader: readers assign every partition and read from the start without ever seeking, so
// their offsets must advance one by one; group members may jump to a committed offset.
func isReader(process string) bool { return strings.HasPrefix(process, "reader") }
