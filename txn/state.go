package txn

import (
	"cmp"
	"slices"
)

// State is where one transactional id is in its current transaction.
type State uint8

const (
	Empty          State = iota // no transaction open (after InitProducerId)
	Ongoing                     // partitions or offsets added, not ended
	PrepareCommit               // commit decided; markers being written
	PrepareAbort                // abort decided; markers being written
	CompleteCommit              // markers written, committed
	CompleteAbort               // markers written, aborted
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}

// String is Kafka's name for the state (DescribeTransactions, ListTransactions).
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// ParseState reads a state name as String writes it.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// Preparing reports a decided transaction whose markers are not all written.
func (s State) Preparing() bool { return s == PrepareCommit || s == PrepareAbort }

// Partition is one partition of a transaction.
type Partition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func comparePartitions(a, b Partition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// Metadata is everything the coordinator keeps about one transactional id. It is a value: the
// transitions return a new one and never change the slices of the one they are given.
type Metadata struct {
	TransactionalID string `json:"transactionalID"`
	ProducerID      int64  `json:"producerID"`
	ProducerEpoch   int16  `json:"producerEpoch"`
	// LastProducerEpoch is the epoch before the coordinator last bumped it on its own (a timeout
	// or fencing abort), -1 otherwise: a producer that lost the bump may re-initialize from it.
	LastProducerEpoch int16 `json:"lastProducerEpoch"`
	TimeoutMillis     int32 `json:"timeoutMillis"`
	State             State `json:"state"`
	// Partitions receive the markers. Invariant: sorted, unique; empty outside Ongoing and Prepare*.
	Partitions []Partition `json:"partitions,omitempty"`
	// Groups whose offsets the transaction commits (AddOffsetsToTxn). Invariant as Partitions.
	Groups []string `json:"groups,omitempty"`
	// StartMillis is when the current transaction became Ongoing (0 when none is).
	StartMillis int64 `json:"startMillis,omitempty"`
	// UpdateMillis is the time of the last transition.
	UpdateMillis int64 `json:"updateMillis"`
}

// HasPartition reports whether p is in the transaction.
func (m Metadata) HasPartition(p Partition) bool {
	_, found := slices.BinarySearchFunc(m.Partitions, p, comparePartitions)
	return found
}

// HasGroup reports whether group's offsets are in the transaction.
func (m Metadata) HasGroup(group string) bool {
	_, found := slices.BinarySearch(m.Groups, group)
	return found
}

// Expired reports an Ongoing transaction open longer than its timeout at nowMillis.
func (m Metadata) Expired(nowMillis int64) bool {
	return m.State == Ongoing && nowMillis-m.StartMillis > int64(m.TimeoutMillis)
}

// withPartitions returns the sorted union of have and add, and whether it grew.
func withPartitions(have, add []Partition) ([]Partition, bool) {
	out := slices.Clone(have)
	grew := false
	for _, p := range add {
		i, found := slices.BinarySearchFunc(out, p, comparePartitions)
		if !found {
			out = slices.Insert(out, i, p)
			grew = true
		}
	}
	return out, grew
}
