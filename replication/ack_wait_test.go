package replication

import (
	"sync"
	"testing"
	"time"
)

// The ack wait stages end at the report of the last in-sync follower to pass the batch: its
// fetch offset (followers_fetched) and its durable offset (followers_durable, fsync acks only).
// A follower outside the ISR does not count.
func TestAckWaitStagesEndAtTheLastInSyncFollower(t *testing.T) {
	for _, mode := range []AckMode{AckFsync, AckMemory} {
		t.Run(mode.String(), func(t *testing.T) {
			var mu sync.Mutex
			observed := map[AckWaitStage][]time.Duration{}
			leader := openReplicaWith(t, t.TempDir(), Config{NodeID: 1, AckMode: mode, LagTimeMax: 5 * time.Second,
				ObserveAckWait: func(stage AckWaitStage, wait time.Duration) {
					mu.Lock()
					observed[stage] = append(observed[stage], wait)
					mu.Unlock()
				}})
			if _, err := leader.MakeLeader(3, 0, []int32{1, 2, 3, 4}, []int32{1, 2, 3}, time.Now()); err != nil {
				t.Fatal(err)
			}
			result, err := leader.Append(records("a", "b", "c"))
			if err != nil {
				t.Fatal(err)
			}
			base := time.Now()
			acked := make(chan error, 1)
			leader.AwaitAcks(result.LastOffset, 1, func(err error) { acked <- err })
			end := result.LastOffset + 1
			fetched := func(follower int32, durable int64, at time.Duration) {
				t.Helper()
				if _, err := leader.FollowerFetched(follower, -1, end, durable, false, base.Add(at)); err != nil {
					t.Fatal(err)
				}
			}
			fetched(2, 0, 10*time.Millisecond)
			fetched(4, end, 50*time.Millisecond) // not in the ISR: ignored
			fetched(3, 0, 20*time.Millisecond)
			fetched(2, end, 30*time.Millisecond)
			fetched(3, end, 40*time.Millisecond)
			if err := <-acked; err != nil {
				t.Fatal(err)
			}

			mu.Lock()
			defer mu.Unlock()
			fetchWaits, durableWaits := observed[FollowersFetched], observed[FollowersDurable]
			if len(fetchWaits) != 1 {
				t.Fatalf("followers_fetched observed %v, want one wait", fetchWaits)
			}
			// The waiter was registered at or after base: the wait is 20 ms (follower 3's fetch) less
			// the time between base and the registration.
			if fetchWaits[0] <= 0 || fetchWaits[0] > 20*time.Millisecond {
				t.Fatalf("followers_fetched wait %v, want in (0, 20ms]", fetchWaits[0])
			}
			if mode == AckMemory {
				if len(durableWaits) != 0 {
					t.Fatalf("memory acks observed followers_durable %v", durableWaits)
				}
				return
			}
			if len(durableWaits) != 1 || durableWaits[0]-fetchWaits[0] != 20*time.Millisecond {
				t.Fatalf("followers_durable observed %v with followers_fetched %v, want 20ms after it (follower 3's durable report)", durableWaits, fetchWaits)
			}
		})
	}
}
