package broker

// AlterClientQuotas v0-v1: sluice enforces no client quotas, so setting one is refused rather than
// stored and ignored: each entry that sets a value gets INVALID_REQUEST with a message saying so
// (validate_only too). An entry that only removes quotas succeeds and changes nothing: there are
// none to remove. A malformed entry (an entity type other than user, client-id and ip, one named
// twice, ip combined with the others, no entity, or an op key that is not a client quota) gets
// INVALID_REQUEST with its reason.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// quotaKeys are Kafka's client quota keys, by the entity they apply to.
var quotaKeys = map[string]string{
	"producer_byte_rate":       quotaEntityClientID,
	"consumer_byte_rate":       quotaEntityClientID,
	"request_percentage":       quotaEntityClientID,
	"controller_mutation_rate": quotaEntityClientID,
	"connection_creation_rate": quotaEntityIP,
}

func (b *Broker) handleAlterClientQuotas(r *request, req *kmsg.AlterClientQuotasRequest) {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	anyError := false
	for _, entry := range req.Entries {
		result := kmsg.NewAlterClientQuotasResponseEntry()
		for _, e := range entry.Entity {
			entity := kmsg.NewAlterClientQuotasResponseEntryEntity()
			entity.Type, entity.Name = e.Type, e.Name
			result.Entity = append(result.Entity, entity)
		}
		if err := checkQuotaAlteration(entry); err != nil {
			result.ErrorCode, result.ErrorMessage = protocol.CodeFor(err), errorMessage(err)
			anyError = true
		}
		resp.Entries = append(resp.Entries, result)
	}
	if anyError {
		r.failed()
	}
	r.respond(resp)
}

// checkQuotaAlteration returns why entry cannot be applied, or nil for one that changes nothing.
func checkQuotaAlteration(entry kmsg.AlterClientQuotasRequestEntry) error {
	if len(entry.Entity) == 0 {
		return fmt.Errorf("broker: quota entry names no entity: %w", protocol.InvalidRequest)
	}
	seen := map[string]bool{}
	for _, e := range entry.Entity {
		if err := checkQuotaEntityType(e.Type); err != nil {
			return err
		}
		if seen[e.Type] {
			return fmt.Errorf("broker: quota entity type %q named twice: %w", e.Type, protocol.InvalidRequest)
		}
		seen[e.Type] = true
	}
	if seen[quotaEntityIP] && (seen[quotaEntityUser] || seen[quotaEntityClientID]) {
		return fmt.Errorf("broker: ip quotas cannot be combined with user or client-id: %w", protocol.InvalidRequest)
	}
	for _, op := range entry.Ops {
		if _, ok := quotaKeys[op.Key]; !ok {
			return fmt.Errorf("broker: %q is not a client quota: %w", op.Key, protocol.InvalidRequest)
		}
	}
	for _, op := range entry.Ops {
		if !op.Remove {
			return fmt.Errorf("broker: cannot set %s: sluice does not enforce client quotas: %w", op.Key, protocol.InvalidRequest)
		}
	}
	return nil
}
