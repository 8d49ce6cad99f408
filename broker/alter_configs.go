package broker

// AlterConfigs v0-v2 (replace a topic's overrides with exactly the given set) and
// IncrementalAlterConfigs v0-v1 (SET and DELETE per key) for topics, through the coordinator; new
// values reach the logs when the change is applied (retention, segment size and flush settings).
// Refusals: unknown topic UNKNOWN_TOPIC_OR_PARTITION; unknown key or bad value INVALID_CONFIG (also
// APPEND and SUBTRACT: the only list config, cleanup.policy, has one served value); broker resources
// (static, set by flags) and other resource types INVALID_REQUEST.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

const (
	opSet    = 0
	opDelete = 1
)

func (b *Broker) handleAlterConfigs(r *request, req *kmsg.AlterConfigsRequest) {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	anyError := false
	for _, resource := range req.Resources {
		result := kmsg.NewAlterConfigsResponseResource()
		result.ResourceType, result.ResourceName = resource.ResourceType, resource.ResourceName
		set := map[string]string{}
		var err error
		for _, c := range resource.Configs {
			if c.Value == nil {
				err = fmt.Errorf("broker: config %s has a null value: %w", c.Name, protocol.InvalidConfig)
				break
			}
			set[c.Name] = *c.Value
		}
		if err == nil {
			err = b.alterTopicConfigs(resource.ResourceType, resource.ResourceName, set, nil, true, req.ValidateOnly)
		}
		if err != nil {
			result.ErrorCode, result.ErrorMessage = adminErrorCode(err), errorMessage(err)
			anyError = true
		}
		resp.Resources = append(resp.Resources, result)
	}
	if anyError {
		r.failed()
	}
	r.respond(resp)
}

func (b *Broker) handleIncrementalAlterConfigs(r *request, req *kmsg.IncrementalAlterConfigsRequest) {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	anyError := false
	for _, resource := range req.Resources {
		result := kmsg.NewIncrementalAlterConfigsResponseResource()
		result.ResourceType, result.ResourceName = resource.ResourceType, resource.ResourceName
		set := map[string]string{}
		var remove []string
		var err error
		for _, c := range resource.Configs {
			switch {
			case c.Op == opSet && c.Value != nil:
				set[c.Name] = *c.Value
			case c.Op == opSet:
				err = fmt.Errorf("broker: config %s has a null value: %w", c.Name, protocol.InvalidConfig)
			case c.Op == opDelete:
				remove = append(remove, c.Name)
			default:
				err = fmt.Errorf("broker: config %s: operation %d (append/subtract) is not served: %w", c.Name, c.Op, protocol.InvalidConfig)
			}
		}
		if err == nil {
			err = b.alterTopicConfigs(resource.ResourceType, resource.ResourceName, set, remove, false, req.ValidateOnly)
		}
		if err != nil {
			result.ErrorCode, result.ErrorMessage = adminErrorCode(err), errorMessage(err)
			anyError = true
		}
		resp.Resources = append(resp.Resources, result)
	}
	if anyError {
		r.failed()
	}
	r.respond(resp)
}

func (b *Broker) alterTopicConfigs(resourceType kmsg.ConfigResourceType, name string, set map[string]string, remove []string, replaceAll, validateOnly bool) error {
	switch resourceType {
	case resourceTopic:
	case resourceGroup:
		return b.alterGroupConfigs(name, set, remove, replaceAll, validateOnly)
	case resourceBroker:
		return fmt.Errorf("broker: broker configs are static (set by sluiced flags): %w", protocol.InvalidRequest)
	default:
		return fmt.Errorf("broker: resource type %d is not served: %w", resourceType, protocol.InvalidRequest)
	}
	ctx, cancel := adminContext(30_000)
	defer cancel()
	if err := b.coordinator.AlterTopicConfigs(ctx, name, set, remove, replaceAll, validateOnly); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	return b.registry.waitVersion(ctx, b.coordinator.Metadata().Version)
}
