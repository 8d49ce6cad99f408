package broker

// CreateAcls, DescribeAcls and DeleteAcls v0-v3: bindings in Kafka's model (package acl), stored in
// the replicated metadata. With the authorizer off every one answers SECURITY_DISABLED, as Kafka
// does without an authorizer. A binding that is not storable (ANY/MATCH codes, a principal not of
// the form Type:name, a cluster resource not named kafka-cluster) answers INVALID_REQUEST for
// that creation; a filter with unknown codes INVALID_REQUEST. v0 has no pattern type: it means
// LITERAL in bindings and filters. Authorization (ALTER / DESCRIBE on the cluster) is in
// authorize.go.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/acl"
	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleCreateAcls(r *request, req *kmsg.CreateACLsRequest) {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	var bindings []acl.Binding
	var stored []int
	for i, c := range req.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		if !b.security.enabled {
			resp.Results[i].ErrorCode = protocol.SecurityDisabled.Code
			continue
		}
		binding := acl.Binding{ResourceType: acl.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
			PatternType: acl.PatternType(c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType)}
		if req.Version == 0 {
			binding.PatternType = acl.PatternLiteral
		}
		if err := binding.Validate(); err != nil {
			resp.Results[i].ErrorCode = protocol.InvalidRequest.Code
			message := err.Error()
			resp.Results[i].ErrorMessage = &message
			continue
		}
		bindings = append(bindings, binding)
		stored = append(stored, i)
	}
	if len(bindings) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), securityWriteTimeout)
		err := b.coordinator.CreateACLs(ctx, bindings)
		cancel()
		if err != nil {
			for _, i := range stored {
				resp.Results[i].ErrorCode = adminErrorCode(err)
			}
		}
	}
	for _, result := range resp.Results {
		if result.ErrorCode != 0 {
			r.failed()
			break
		}
	}
	r.respond(resp)
}

func (b *Broker) handleDescribeAcls(r *request, req *kmsg.DescribeACLsRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if !b.security.enabled {
		resp.ErrorCode = protocol.SecurityDisabled.Code
		r.failed()
		r.respond(resp)
		return
	}
	filter := acl.Filter{ResourceType: acl.ResourceType(req.ResourceType), ResourceName: req.ResourceName,
		PatternType: acl.PatternType(req.ResourcePatternType), Principal: req.Principal, Host: req.Host,
		Operation: acl.Operation(req.Operation), Permission: acl.Permission(req.PermissionType)}
	if req.Version == 0 {
		filter.PatternType = acl.PatternLiteral
	}
	if err := filter.Validate(); err != nil {
		resp.ErrorCode = protocol.InvalidRequest.Code
		message := err.Error()
		resp.ErrorMessage = &message
		r.failed()
		r.respond(resp)
		return
	}
	// Bindings come sorted by resource, so each resource's entries are adjacent.
	for _, binding := range b.coordinator.Security().ACLs.Select(filter) {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != kmsg.ACLResourceType(binding.ResourceType) ||
			resp.Resources[n-1].ResourceName != binding.ResourceName ||
			resp.Resources[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(binding.PatternType) {
			resource := kmsg.NewDescribeACLsResponseResource()
			resource.ResourceType = kmsg.ACLResourceType(binding.ResourceType)
			resource.ResourceName = binding.ResourceName
			resource.ResourcePatternType = kmsg.ACLResourcePatternType(binding.PatternType)
			resp.Resources = append(resp.Resources, resource)
			n++
		}
		entry := kmsg.NewDescribeACLsResponseResourceACL()
		entry.Principal, entry.Host = binding.Principal, binding.Host
		entry.Operation, entry.PermissionType = kmsg.ACLOperation(binding.Operation), kmsg.ACLPermissionType(binding.Permission)
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, entry)
	}
	r.respond(resp)
}

func (b *Broker) handleDeleteAcls(r *request, req *kmsg.DeleteACLsRequest) {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	var filters []acl.Filter
	var positions []int
	for i, f := range req.Filters {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		if !b.security.enabled {
			resp.Results[i].ErrorCode = protocol.SecurityDisabled.Code
			continue
		}
		filter := acl.Filter{ResourceType: acl.ResourceType(f.ResourceType), ResourceName: f.ResourceName,
			PatternType: acl.PatternType(f.ResourcePatternType), Principal: f.Principal, Host: f.Host,
			Operation: acl.Operation(f.Operation), Permission: acl.Permission(f.PermissionType)}
		if req.Version == 0 {
			filter.PatternType = acl.PatternLiteral
		}
		if err := filter.Validate(); err != nil {
			resp.Results[i].ErrorCode = protocol.InvalidRequest.Code
			message := err.Error()
			resp.Results[i].ErrorMessage = &message
			continue
		}
		filters = append(filters, filter)
		positions = append(positions, i)
	}
	if len(filters) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), securityWriteTimeout)
		deleted, err := b.coordinator.DeleteACLs(ctx, filters)
		cancel()
		for j, i := range positions {
			if err != nil {
				resp.Results[i].ErrorCode = adminErrorCode(err)
				continue
			}
			if j >= len(deleted) {
				continue
			}
			for _, binding := range deleted[j] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName = kmsg.ACLResourceType(binding.ResourceType), binding.ResourceName
				m.ResourcePatternType = kmsg.ACLResourcePatternType(binding.PatternType)
				m.Principal, m.Host = binding.Principal, binding.Host
				m.Operation, m.PermissionType = kmsg.ACLOperation(binding.Operation), kmsg.ACLPermissionType(binding.Permission)
				resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			}
		}
	}
	for _, result := range resp.Results {
		if result.ErrorCode != 0 {
			r.failed()
			break
		}
	}
	r.respond(resp)
}
