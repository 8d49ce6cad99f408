package broker

// ListenerFailed is closed when the Kafka listener can no longer accept connections (it broke
// for good, or the network event loops stopped on their own); ListenerFailure says why. A broker
// in that state should be taken out of service: sluiced reports not ready and exits.
func (b *Broker) ListenerFailed() <-chan struct{} { return b.server.FailedSignal() }

// ListenerFailure is why the listener failed, or nil while it serves.
func (b *Broker) ListenerFailure() error { return b.server.Failed() }

// PartitionsHeld is the number of partition logs this broker has open.
func (b *Broker) PartitionsHeld() int {
	count := 0
	b.registry.forEach(func(*partition) { count++ })
	return count
}
