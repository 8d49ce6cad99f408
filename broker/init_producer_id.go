package broker

// InitProducerId v0-v4. With a transactional id see init_producer_id_txn.go. Without a transactional id the broker answers
// a producer id no one had before (producer_id_allocator.go: blocks reserved through Raft) at epoch
// 0. From v3 a producer may send the id and epoch it has (KIP-360: it lost track of a sequence and
// wants to start over); the broker then bumps the epoch of that id, which fences the producer's
// in-flight batches of the old epoch (INVALID_PRODUCER_EPOCH) and lets it restart every partition
// at sequence 0. An id the cluster never issued, or an epoch that cannot be bumped (Kafka keeps
// MaxInt16 unused), gets a fresh id at epoch 0 instead, which is what Kafka itself answers to every
// non-transactional InitProducerId. Partition state is checked at produce time (producer_state.go).
//
// Refusals: an empty transactional id INVALID_REQUEST (Kafka's answer); an id given without an epoch, or the reverse, INVALID_REQUEST (Kafka's answer); no
// producer id block reservable now (no controller) COORDINATOR_LOAD_IN_PROGRESS, retriable.

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// producerIDRequest is what the broker decides to do with an InitProducerId request.
type producerIDRequest uint8

const (
	producerIDFresh   producerIDRequest = iota // hand out a new id at epoch 0
	producerIDBump                             // same id, epoch + 1
	producerIDInvalid                          // INVALID_REQUEST
)

// decideProducerID is the policy above for a request carrying id and epoch (-1 and -1 when it has
// none), given the bound below which every id ever issued lies.
func decideProducerID(id int64, epoch int16, issuedBelow int64) producerIDRequest {
	switch {
	case id == -1 && epoch == -1:
		return producerIDFresh
	case id < 0 || epoch < 0:
		return producerIDInvalid
	case id >= issuedBelow || epoch >= math.MaxInt16-1:
		return producerIDFresh
	}
	return producerIDBump
}

func (b *Broker) handleInitProducerID(r *request, req *kmsg.InitProducerIDRequest) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	id, epoch, err := b.initProducerID(r, req)
	if err != nil {
		resp.ErrorCode = protocol.CodeFor(err)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		b.logger.Debug("InitProducerId refused", "remote", r.session.conn.RemoteAddr(), "err", err)
		r.failed()
	} else {
		resp.ProducerID, resp.ProducerEpoch = id, epoch
	}
	r.respond(resp)
}

func (b *Broker) initProducerID(r *request, req *kmsg.InitProducerIDRequest) (int64, int16, error) {
	if req.TransactionalID != nil {
		if *req.TransactionalID == "" {
			return 0, 0, fmt.Errorf("broker: empty transactional id: %w", protocol.InvalidRequest)
		}
		return b.initTransactionalProducerID(r, req) // init_producer_id_txn.go
	}
	id, epoch := int64(-1), int16(-1)
	if r.header.APIVersion >= 3 {
		id, epoch = req.ProducerID, req.ProducerEpoch
	}
	switch decideProducerID(id, epoch, b.producerIDs.issuedBelow()) {
	case producerIDInvalid:
		return 0, 0, fmt.Errorf("broker: producer id %d with epoch %d: %w", id, epoch, protocol.InvalidRequest)
	case producerIDBump:
		return id, epoch + 1, nil
	}
	// A block reservation is one Raft round; the bound only guards against a cluster without a
	// controller.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fresh, err := b.producerIDs.allocate(ctx)
	if err != nil {
		return 0, 0, err
	}
	return fresh, 0, nil
}
