package client

import "testing"

// Consumers and producers subscribe to metadata refreshes; closing them must unsubscribe, or a
// long-lived Client grows with every consumer it ever made.
func TestMetadataSubscriptionsEnd(t *testing.T) {
	m := &metadataCache{}
	var cancels []func()
	for range 100 {
		cancels = append(cancels, m.subscribe(func() {}))
	}
	for _, cancel := range cancels[:99] {
		cancel()
	}
	cancels[0]() // twice is harmless
	if n := len(m.mu.listeners); n != 1 {
		t.Fatalf("%d listeners left after 99 of 100 cancelled", n)
	}
}
