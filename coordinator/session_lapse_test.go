package coordinator

import (
	"testing"
	"time"
)

// TestSessionExpiresWithoutTheController: a broker's session counts as expired once no heartbeat
// has been acknowledged for the session timeout (here: the other two voters are stopped, so no
// controller can be elected), and never before the first heartbeat or while heartbeats get
// through.
func TestSessionExpiresWithoutTheController(t *testing.T) {
	tc := startCluster(t, 3)
	registerAll(t, tc)
	survivor := tc.node(1)
	if survivor.SessionExpired(time.Now()) {
		t.Fatal("expired before the first heartbeat")
	}
	survivor.StartSession(survivor.Metadata().Brokers[1])
	awaitCondition(t, "a heartbeat acknowledged", func() bool { return survivor.session.renewed.Load() != 0 })
	if survivor.SessionExpired(time.Now()) {
		t.Fatal("expired right after a heartbeat")
	}
	tc.stop(2)
	tc.stop(3)
	awaitCondition(t, "the session lapses", func() bool { return survivor.SessionExpired(time.Now()) })
	renewed := time.Unix(0, survivor.session.renewed.Load())
	if lapse := time.Since(renewed); lapse <= survivor.config.BrokerSessionTimeout {
		t.Fatalf("expired %v after the last acknowledged heartbeat, before the session timeout %v", lapse, survivor.config.BrokerSessionTimeout)
	}
}
