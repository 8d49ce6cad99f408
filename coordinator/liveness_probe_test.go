package coordinator

import (
	"testing"
	"time"
)

func TestProbeDue(t *testing.T) {
	const after = 400 * time.Millisecond
	check := func(silent, probeAfter time.Duration, deposed, want bool) {
		t.Helper()
		if got := probeDue(silent, probeAfter, deposed); got != want {
			t.Errorf("probeDue(%v, %v, deposed %v) = %v, want %v", silent, probeAfter, deposed, got, want)
		}
	}
	check(100*time.Millisecond, after, false, false) // heartbeating
	check(after, after, false, false)
	check(after+time.Millisecond, after, false, true)             // missed two heartbeats
	check(0, after, true, true)                                   // the deposed controller, not heard from
	check(time.Hour, 0, true, false)                              // probing off
	check(after+time.Millisecond, 0, false, false)                // probing off
	check(50*time.Millisecond, time.Minute, true, true)           // the deposed rule needs no silence
	check(50*time.Millisecond, time.Minute, false, false)         // others do
	check(2*time.Minute, time.Minute, false, true)                // long silence
	check(time.Minute+time.Nanosecond, time.Minute, false, true)  // just over
	check(time.Minute-time.Nanosecond, time.Minute, false, false) // just under
}

// TestClusterFencesABrokerWhoseListenerRefuses: with a session timeout far longer than the test
// may wait, a broker whose process is gone (its address refuses connections) is fenced anyway,
// while a broker that is silent but still listening (its heartbeats stopped, its process up) is
// probed and left alone for the session timeout to decide.
func TestClusterFencesABrokerWhoseListenerRefuses(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) { c.BrokerSessionTimeout = time.Minute })
	const silent = int32(4) // a non-voter that stops heartbeating but keeps listening
	if err := tc.open(tc.nodeConfig(silent)); err != nil {
		t.Fatal(err)
	}
	registerWithSessions(t, tc, 4)
	controller := tc.controller()
	if _, err := controller.CreateTopic(testContext(t), "probed", 4, 3, nil, false); err != nil {
		t.Fatal(err)
	}

	tc.node(silent).stopSession()
	probes := controller.metrics.brokerProbes.Get()
	awaitCondition(t, "the silent broker probed three times", func() bool { return controller.metrics.brokerProbes.Get() >= probes+3 })
	if m := controller.Metadata(); m.Brokers[silent].Fenced {
		t.Fatalf("broker %d, silent but listening, fenced within its session: %+v", silent, m.Brokers[silent])
	}

	victim := int32(1)
	for victim == controller.NodeID() {
		victim++
	}
	tc.stop(victim)
	after := awaitMetadata(t, controller, "the stopped broker fenced", func(m *Metadata) bool { return m.Brokers[victim].Fenced })
	for i, p := range after.Topics["probed"].Partitions {
		if p.Leader == victim || p.Leader < 0 {
			t.Fatalf("partition %d still led by the stopped broker %d (or by none): %+v", i, victim, p)
		}
	}
	if after.Brokers[silent].Fenced {
		t.Fatalf("broker %d, silent but listening, fenced with the stopped one", silent)
	}
	if got := controller.metrics.brokersProbedDead.Get(); got != 1 {
		t.Fatalf("brokers fenced after a refused probe: %d, want 1", got)
	}
}

// TestClusterNewControllerProbesTheDeposedOne: the controller's process dies. The new controller
// starts every broker's session afresh, and (with probes otherwise as rare as the session
// timeout, both far longer than the test may wait) still fences the old controller at once: it
// probes the controller it took over from until that one heartbeats, and the dead one refuses.
func TestClusterNewControllerProbesTheDeposedOne(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) {
		c.BrokerSessionTimeout, c.BrokerProbeAfter = time.Minute, time.Minute
	})
	registerWithSessions(t, tc, 3)
	old := tc.controller()
	killed := old.NodeID()
	if _, err := old.CreateTopic(testContext(t), "deposed", 3, 3, nil, false); err != nil {
		t.Fatal(err)
	}
	tc.stop(killed)
	controller := tc.controller()
	after := awaitMetadata(t, controller, "the old controller fenced", func(m *Metadata) bool { return m.Brokers[killed].Fenced })
	for i, p := range after.Topics["deposed"].Partitions {
		if p.Leader == killed || p.Leader < 0 {
			t.Fatalf("partition %d still led by the old controller %d (or by none): %+v", i, killed, p)
		}
	}
	for _, id := range after.BrokerIDs() {
		if id != killed && after.Brokers[id].Fenced {
			t.Fatalf("broker %d, alive, fenced", id)
		}
	}
}
