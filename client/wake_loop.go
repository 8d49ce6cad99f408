package client

import "time"

// runPasses is the loop behind the producer's sender and the consumer's fetcher: it runs pass when
// woken or when the deadline pass last returned arrives (a zero deadline: none), until stop closes.
// pass gets the current time and returns the earliest moment it wants to run again.
func runPasses(stop <-chan struct{}, wake <-chan struct{}, pass func(now time.Time) (next time.Time)) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-wake:
		case <-timer.C:
		}
		next := pass(time.Now())
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), 0)
		}
		timer.Reset(wait)
	}
}
