package broker

// CreatePartitions v0-v3: raises a topic's partition count through the coordinator; new partitions'
// logs are opened before the answer. Refusals: unknown topic UNKNOWN_TOPIC_OR_PARTITION, a count not
// above the current one INVALID_PARTITIONS, a topic named twice INVALID_REQUEST, not the controller
// NOT_CONTROLLER. Manual assignments are served: one replica list per new partition, each with the
// topic's replication factor, without a broker twice, naming registered brokers only (at least one
// live); otherwise INVALID_REPLICA_ASSIGNMENT.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleCreatePartitions(r *request, req *kmsg.CreatePartitionsRequest) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	ctx, cancel := adminContext(req.TimeoutMillis)
	defer cancel()
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	anyError := false
	for _, rt := range req.Topics {
		result := kmsg.NewCreatePartitionsResponseTopic()
		result.Topic = rt.Topic
		err := func() error {
			switch {
			case seen[rt.Topic] > 1:
				return fmt.Errorf("broker: topic %q named more than once: %w", rt.Topic, protocol.InvalidRequest)
			}
			var err error
			if rt.Assignment != nil {
				assignments := make([][]int32, len(rt.Assignment))
				for i, a := range rt.Assignment {
					assignments[i] = a.Replicas
				}
				err = b.coordinator.CreatePartitionsWithAssignments(ctx, rt.Topic, rt.Count, assignments, req.ValidateOnly)
			} else {
				err = b.coordinator.CreatePartitions(ctx, rt.Topic, rt.Count, req.ValidateOnly)
			}
			if err != nil || req.ValidateOnly {
				return err
			}
			return b.registry.waitVersion(ctx, b.coordinator.Metadata().Version)
		}()
		if err != nil {
			result.ErrorCode = adminErrorCode(err)
			result.ErrorMessage = errorMessage(err)
			anyError = true
		}
		resp.Topics = append(resp.Topics, result)
	}
	if anyError {
		r.failed()
	}
	r.respond(resp)
}
