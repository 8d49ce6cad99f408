package client

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestSubscriptionRoundTrip(t *testing.T) {
	owned := []TopicPartition{{"b", 2}, {"a", 1}, {"a", 0}}
	for _, b := range []Balancer{RangeBalancer(), CooperativeStickyBalancer()} {
		raw := encodeSubscription(b, []string{"b", "a", "b"}, owned, 7)
		m, err := decodeSubscription("member", "instance", raw)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m.topics, []string{"a", "b"}) || m.generation != 7 || m.instanceID != "instance" {
			t.Errorf("%s: decoded %+v", b.name, m)
		}
		wantOwned := []TopicPartition{{"a", 0}, {"a", 1}, {"b", 2}}
		if !b.cooperative {
			wantOwned = nil
		}
		if !slices.Equal(m.owned, wantOwned) {
			t.Errorf("%s: owned %v, want %v", b.name, m.owned, wantOwned)
		}
	}
}

// franz-go's subscriptions decode to what it claims, and its parser reads our assignments: the
// two clients can share a group whichever leads.
func TestConsumerProtocolInteroperatesWithFranzGo(t *testing.T) {
	raw := kgo.CooperativeStickyBalancer().JoinGroupMetadata([]string{"t", "s"}, map[string][]int32{"t": {3, 1}}, 4)
	m, err := decodeSubscription("franz", "", raw)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.topics, []string{"s", "t"}) || m.generation != 4 || !slices.Equal(m.owned, []TopicPartition{{"t", 1}, {"t", 3}}) {
		t.Errorf("decoded franz-go subscription %+v", m)
	}
	if m, err = decodeSubscription("franz", "", kgo.RangeBalancer().JoinGroupMetadata([]string{"t"}, nil, 2)); err != nil || !slices.Equal(m.topics, []string{"t"}) {
		t.Errorf("decoded franz-go range subscription %+v, %v", m, err)
	}

	assignment := []TopicPartition{{"t", 0}, {"s", 5}, {"t", 2}}
	parsed, err := kgo.ParseConsumerSyncAssignment(encodeAssignment(assignment))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(parsed["t"], []int32{0, 2}) || !slices.Equal(parsed["s"], []int32{5}) || len(parsed) != 2 {
		t.Errorf("franz-go parsed our assignment as %v", parsed)
	}
	back, err := decodeAssignment(encodeAssignment(assignment))
	if err != nil || !slices.Equal(back, []TopicPartition{{"s", 5}, {"t", 0}, {"t", 2}}) {
		t.Errorf("assignment round trip: %v, %v", back, err)
	}
	if empty, err := decodeAssignment(nil); err != nil || len(empty) != 0 {
		t.Errorf("empty assignment: %v, %v", empty, err)
	}
}

func TestSubscriptionVersionOneWithoutOwnedPartitions(t *testing.T) {
	// Version 1 claimed, version 0 written: some clients do this. Read it as version 0.
	raw := []byte{0, 1, 0, 0, 0, 1, 0, 1, 't', 0xff, 0xff, 0xff, 0xff}
	m, err := decodeSubscription("old", "", raw)
	if err != nil || !slices.Equal(m.topics, []string{"t"}) || m.generation != -1 {
		t.Errorf("decoded %+v, %v", m, err)
	}
}

func FuzzDecodeConsumerProtocol(f *testing.F) {
	f.Add(encodeSubscription(CooperativeStickyBalancer(), []string{"a"}, []TopicPartition{{"a", 1}}, 3))
	f.Add(encodeAssignment([]TopicPartition{{"a", 1}}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		decodeSubscription("fuzz", "", raw)
		decodeAssignment(raw)
	})
}
