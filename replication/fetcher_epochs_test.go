package replication

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The divergence search between copies that hold no records settles: a follower whose history
// has epochs the leader never had (it led at 1 and 3; the leader's history is 0, 2, 4, all
// starting at offset 0) is told where the leader's older epoch ends, drops its empty newer epochs
// and asks again, instead of asking about epoch 3 for ever and never fetching (the restarted
// node that never rejoined the ISR in TestClusterControllerDeathDuringTopicCreation).
func TestEpochSearchSettlesOverEmptyEpochs(t *testing.T) {
	m := newTestManager(t, 1)
	follower, leader := openReplica(t, 1, AckFsync), openReplica(t, 2, AckFsync)
	for _, epoch := range []int32{0, 1, 3} {
		if err := follower.Epochs.Assign(epoch, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, epoch := range []int32{0, 2, 4} {
		if err := leader.Epochs.Assign(epoch, 0); err != nil {
			t.Fatal(err)
		}
	}
	follower.MakeFollower(2, 4, 7, []int32{1, 2}, []int32{2})
	p := &followed{replica: follower, leaderEpoch: 4, needsEpochCheck: true, reportedDurable: -1}
	m.mu.Lock()
	m.mu.followed[2] = map[partitionKey]*followed{keyOf(follower): p}
	m.mu.Unlock()
	f := &fetcher{manager: m, leaderID: 2, logger: m.logger}

	for round := 1; p.needsEpochCheck; round++ {
		if round > 5 {
			t.Fatalf("still searching after %d rounds; follower epochs %v", round-1, follower.Epochs.Entries())
		}
		// The leader answers the question the fetcher would send (epochRequest).
		asked := f.epochRequest([]*followed{p}).Topics[0].Partitions[0].LeaderEpoch
		epoch, end := leader.Epochs.EndOffsetFor(asked, leader.Log.LogEndOffset())
		resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
		resp.Version = epochRequestVersion
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = follower.Topic
		rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.EndOffset = follower.Partition, epoch, end
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		if err := f.handleEpochs([]*followed{p}, resp.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
	}
	if follower.Log.LogEndOffset() != 0 {
		t.Fatalf("log end %d", follower.Log.LogEndOffset())
	}
}

// TestAcksPipelineOnlyWhenSlow: one acknowledgement fetch at a time while they come back quickly;
// another once the last has been out for ackPipelineAfter (a slow link), up to maxAcksInFlight.
func TestAcksPipelineOnlyWhenSlow(t *testing.T) {
	sent := time.Now()
	cases := []struct {
		inFlight int
		after    time.Duration
		want     bool
	}{
		{0, 0, true},
		{1, 0, false},
		{1, ackPipelineAfter - time.Millisecond, false},
		{1, ackPipelineAfter, true},
		{maxAcksInFlight - 1, time.Second, true},
		{maxAcksInFlight, time.Second, false},
	}
	for _, c := range cases {
		if got := mayAck(c.inFlight, sent, sent.Add(c.after)); got != c.want {
			t.Errorf("mayAck(%d in flight, last sent %v ago) = %v, want %v", c.inFlight, c.after, got, c.want)
		}
	}
}
