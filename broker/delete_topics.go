package broker

// DeleteTopics v0-v6: deletes topics through the coordinator; their logs are removed from disk when
// the change is applied here, and the answer waits for that. Topics are named (v0-v5) or named or
// identified by id (v6). Refusals: unknown topic UNKNOWN_TOPIC_OR_PARTITION (v6 by id:
// UNKNOWN_TOPIC_ID), internal topics INVALID_REQUEST, not the controller NOT_CONTROLLER.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleDeleteTopics(r *request, req *kmsg.DeleteTopicsRequest) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	ctx, cancel := adminContext(req.TimeoutMillis)
	defer cancel()
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	for _, name := range req.TopicNames {
		targets = append(targets, target{name: &name})
	}
	for _, t := range req.Topics {
		targets = append(targets, target{name: t.Topic, id: t.TopicID})
	}
	anyError := false
	for _, t := range targets {
		result := kmsg.NewDeleteTopicsResponseTopic()
		result.Topic, result.TopicID = t.name, t.id
		err := func() error {
			meta := b.coordinator.Metadata()
			name := ""
			if t.name != nil {
				name = *t.name
			} else {
				for _, topic := range meta.Topics {
					if topic.ID == t.id {
						name = topic.Name
					}
				}
				if name == "" {
					return fmt.Errorf("broker: topic id %x: %w", t.id, protocol.UnknownTopicID)
				}
				result.Topic = &name
			}
			if topic, ok := meta.Topics[name]; ok {
				result.TopicID = topic.ID
				if topic.Internal {
					return fmt.Errorf("broker: internal topic %q cannot be deleted: %w", name, protocol.InvalidRequest)
				}
			}
			if err := b.coordinator.DeleteTopic(ctx, name); err != nil {
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
