package replication

import (
	"slices"
	"testing"
	"time"
)

func TestWatermarksTakeTheSlowestInSyncMember(t *testing.T) {
	followers := map[int32]FollowerPosition{
		2: {LogEnd: 80, Durable: 70},
		3: {LogEnd: 90, Durable: 40},
		4: {LogEnd: 10, Durable: 10}, // not in the ISR: ignored
	}
	high, durable := watermarks(1, 100, 95, []int32{1, 2, 3}, followers, 0, 0)
	if high != 80 || durable != 40 {
		t.Fatalf("got high %d durable %d, want 80 and 40", high, durable)
	}
	// The leader's own flushed offset bounds the durable watermark.
	if _, durable := watermarks(1, 100, 30, []int32{1, 2, 3}, followers, 0, 0); durable != 30 {
		t.Fatalf("durable %d, want the leader's 30", durable)
	}
	// A member whose position is unknown holds both where they were; nothing goes backwards.
	followers[5] = FollowerPosition{LogEnd: -1, Durable: -1}
	high, durable = watermarks(1, 100, 95, []int32{1, 2, 5}, followers, 50, 20)
	if high != 50 || durable != 20 {
		t.Fatalf("unknown member: got %d/%d, want 50/20", high, durable)
	}
	high, durable = watermarks(1, 100, 95, []int32{1, 2}, followers, 90, 75)
	if high != 90 || durable != 75 {
		t.Fatalf("went backwards: %d/%d", high, durable)
	}
	// A lone leader: the high watermark is its log end, the durable one its flushed offset.
	if high, durable := watermarks(1, 100, 60, []int32{1}, nil, 0, 0); high != 100 || durable != 60 {
		t.Fatalf("lone leader: %d/%d", high, durable)
	}
	// Durable never passes high.
	if high, durable := watermarks(1, 100, 100, []int32{1, 2}, map[int32]FollowerPosition{2: {LogEnd: 50, Durable: 50}}, 0, 0); high != 50 || durable != 50 {
		t.Fatalf("got %d/%d", high, durable)
	}
}

func TestDesiredISR(t *testing.T) {
	now := time.Unix(1000, 0)
	lag := 5 * time.Second
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	followers := map[int32]FollowerPosition{
		2: {LogEnd: 100, LastFetch: ago(time.Second), LastCaughtUp: ago(time.Second)},
		3: {LogEnd: 40, LastFetch: ago(time.Second), LastCaughtUp: ago(6 * time.Second)}, // lagging
		4: {LogEnd: 95, LastFetch: ago(time.Second), LastCaughtUp: ago(time.Second)},     // outside, at the high watermark
		5: {LogEnd: 60, LastFetch: ago(time.Second), LastCaughtUp: ago(time.Second)},     // outside, behind
	}
	got := desiredISR(now, lag, lag, 1, []int32{1, 2, 3, 4, 5}, []int32{1, 2, 3}, followers, 95, 50)
	if want := []int32{1, 2, 4}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// A follower below the start of the leader's epoch does not join, even at the high watermark.
	got = desiredISR(now, lag, lag, 1, []int32{1, 4}, []int32{1}, followers, 90, 96)
	if want := []int32{1}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// A follower that stopped fetching does not join.
	followers[4] = FollowerPosition{LogEnd: 95, LastFetch: ago(10 * time.Second)}
	got = desiredISR(now, lag, lag, 1, []int32{1, 4}, []int32{1}, followers, 95, 0)
	if want := []int32{1}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// The leader always stays.
	got = desiredISR(now, lag, lag, 1, []int32{1, 2}, []int32{1, 2}, map[int32]FollowerPosition{}, 0, 0)
	if want := []int32{1}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestCaughtUpFollowsKafka(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var p FollowerPosition
	p = p.fetched(t0, 50, 50, 50, false) // at the log end: caught up now
	if !p.LastCaughtUp.Equal(t0) {
		t.Fatalf("caught up at %v", p.LastCaughtUp)
	}
	p = p.fetched(t0.Add(time.Second), 50, 50, 80, false) // the leader grew meanwhile; the follower had all of the previous end
	if !p.LastCaughtUp.Equal(t0) {
		t.Fatalf("caught up at %v", p.LastCaughtUp)
	}
	p = p.fetched(t0.Add(2*time.Second), 80, 60, 90, false) // it now has what the leader had at its previous fetch
	if !p.LastCaughtUp.Equal(t0.Add(time.Second)) {
		t.Fatalf("caught up at %v, want the previous fetch", p.LastCaughtUp)
	}
	p = p.fetched(t0.Add(3*time.Second), 85, 90, 100, false) // behind both: no change; durable capped at the fetch offset
	if !p.LastCaughtUp.Equal(t0.Add(time.Second)) || p.Durable != 85 {
		t.Fatalf("caught up at %v durable %d", p.LastCaughtUp, p.Durable)
	}
}

// A member whose connections to the leader closed leaves once the grace passes, well before the
// lag time; one that fetched again since is back to the lag time alone, and a disconnected
// replica outside the ISR does not join.
func TestDesiredISRDisconnectedFollower(t *testing.T) {
	now := time.Unix(1000, 0)
	lag, grace := 30*time.Second, time.Second
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	followers := map[int32]FollowerPosition{
		2: {LogEnd: 100, LastFetch: ago(2 * time.Second), LastCaughtUp: ago(2 * time.Second), Disconnected: ago(1500 * time.Millisecond)},
		3: {LogEnd: 100, LastFetch: ago(time.Second), LastCaughtUp: ago(time.Second), Disconnected: ago(500 * time.Millisecond)},
		4: {LogEnd: 100, LastFetch: ago(time.Second), LastCaughtUp: ago(time.Second), Disconnected: ago(500 * time.Millisecond)},
	}
	got := desiredISR(now, lag, grace, 1, []int32{1, 2, 3, 4}, []int32{1, 2, 3}, followers, 100, 0)
	if want := []int32{1, 3}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (2 gone past the grace, 3 within it, 4 outside and disconnected)", got, want)
	}
	reconnected := followers[2].fetched(now, 100, 100, 100, false)
	if !reconnected.Disconnected.IsZero() || !reconnected.inSync(now, lag, grace) {
		t.Fatalf("a fetch after the disconnect must clear it: %+v", reconnected)
	}
}

// A follower whose fetch says its copy failed leaves the ISR at the next check though it is caught
// up, does not rejoin while it says so, and may rejoin once it fetches with a working copy (after
// a restart).
func TestDesiredISRFailedCopy(t *testing.T) {
	now := time.Unix(1000, 0)
	lag, grace := 30*time.Second, time.Second
	failed := FollowerPosition{}.fetched(now, 100, 90, 100, true)
	followers := map[int32]FollowerPosition{2: failed, 3: FollowerPosition{}.fetched(now, 100, 100, 100, false)}
	if failed.inSync(now, lag, grace) {
		t.Fatal("a failed copy counts as in sync")
	}
	got := desiredISR(now, lag, grace, 1, []int32{1, 2, 3}, []int32{1, 2, 3}, followers, 100, 0)
	if want := []int32{1, 3}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (2's copy failed)", got, want)
	}
	got = desiredISR(now, lag, grace, 1, []int32{1, 2, 3}, []int32{1, 3}, followers, 100, 0)
	if want := []int32{1, 3}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (a failed copy may not rejoin)", got, want)
	}
	followers[2] = followers[2].fetched(now, 100, 100, 100, false)
	got = desiredISR(now, lag, grace, 1, []int32{1, 2, 3}, []int32{1, 3}, followers, 100, 0)
	if want := []int32{1, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (a working copy again rejoins)", got, want)
	}
}
