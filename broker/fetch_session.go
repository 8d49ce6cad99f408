package broker

// Fetch sessions (KIP-227, Fetch v7+) are declined: the broker keeps no session, and answers every
// full fetch with session id 0, which tells the client to send full fetches from then on. What a
// request's (session id, epoch) pair means, as Kafka reads it:
//
//	epoch -1 (final)   a full fetch without a session, whatever the session id (a session it names is
//	                   closed; there is none here). kafka-go sends (-1, -1).
//	epoch 0 (initial)  a full fetch that asks for a new session (closing the one named, if any); the
//	                   session is declined, so it is served as a full fetch with session id 0.
//	any other epoch    an incremental fetch in the named session: no session exists, so
//	                   FETCH_SESSION_ID_NOT_FOUND with no topics, and the client falls back to a full
//	                   fetch.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

const (
	fetchSessionInitialEpoch = 0
	fetchSessionFinalEpoch   = -1
)

// fetchSessionRefusal returns the top-level error code for req's session fields, or 0 when req is
// a full fetch the broker serves.
func fetchSessionRefusal(req *kmsg.FetchRequest) int16 {
	if req.Version < 7 {
		return 0
	}
	switch req.SessionEpoch {
	case fetchSessionInitialEpoch, fetchSessionFinalEpoch:
		return 0
	}
	return protocol.FetchSessionIDNotFound.Code
}
