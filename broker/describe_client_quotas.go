package broker

// DescribeClientQuotas v0-v1: sluice enforces no client quotas (no produce, fetch or request-rate
// limits per user, client id or ip), so every well-formed filter matches nothing: an empty entry
// list and no error. A malformed filter gets INVALID_REQUEST with a message, as in Kafka: an entity
// type other than user, client-id and ip; one named twice; ip combined with user or client-id; a
// match type other than exact (0, with a name), default (1) and any (2, both without one).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
	quotaEntityIP       = "ip"

	quotaMatchExact   = 0
	quotaMatchDefault = 1
	quotaMatchAny     = 2
)

func (b *Broker) handleDescribeClientQuotas(r *request, req *kmsg.DescribeClientQuotasRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if err := checkQuotaFilter(req.Components); err != nil {
		resp.ErrorCode, resp.ErrorMessage = protocol.CodeFor(err), errorMessage(err)
		r.failed()
		r.respond(resp)
		return
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	r.respond(resp)
}

// checkQuotaFilter validates DescribeClientQuotas components.
func checkQuotaFilter(components []kmsg.DescribeClientQuotasRequestComponent) error {
	seen := map[string]bool{}
	for _, c := range components {
		if err := checkQuotaEntityType(c.EntityType); err != nil {
			return err
		}
		if seen[c.EntityType] {
			return fmt.Errorf("broker: quota entity type %q named twice: %w", c.EntityType, protocol.InvalidRequest)
		}
		seen[c.EntityType] = true
		switch {
		case c.MatchType == quotaMatchExact && c.Match == nil:
			return fmt.Errorf("broker: exact quota match on %q without a name: %w", c.EntityType, protocol.InvalidRequest)
		case (c.MatchType == quotaMatchDefault || c.MatchType == quotaMatchAny) && c.Match != nil:
			return fmt.Errorf("broker: quota match type %d on %q takes no name: %w", c.MatchType, c.EntityType, protocol.InvalidRequest)
		case c.MatchType != quotaMatchExact && c.MatchType != quotaMatchDefault && c.MatchType != quotaMatchAny:
			return fmt.Errorf("broker: unknown quota match type %d: %w", c.MatchType, protocol.InvalidRequest)
		}
	}
	if seen[quotaEntityIP] && (seen[quotaEntityUser] || seen[quotaEntityClientID]) {
		return fmt.Errorf("broker: ip quotas cannot be combined with user or client-id: %w", protocol.InvalidRequest)
	}
	return nil
}

func checkQuotaEntityType(entityType string) error {
	switch entityType {
	case quotaEntityUser, quotaEntityClientID, quotaEntityIP:
		return nil
	}
	return fmt.Errorf("broker: unknown quota entity type %q: %w", entityType, protocol.InvalidRequest)
}
