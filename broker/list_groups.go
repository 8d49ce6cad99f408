package broker

// ListGroups v0-v5 (v5: types filter and group type; share groups listed from group_kinds.go): every
// group with members state (including groups emptied of their members, until
// group.Config.EmptyRetention expires them) or committed offsets (the latter as Empty, with no
// protocol type), filtered by state from v4 (state names compare case-insensitively, as in
// Kafka). Refusals: not the metadata leader COORDINATOR_NOT_AVAILABLE.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/group"
	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleListGroups(r *request, req *kmsg.ListGroupsRequest) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if err := b.checkCoordinator(""); err != nil {
		resp.ErrorCode = protocol.CodeFor(err)
		r.failed()
		r.respond(resp)
		return
	}
	summaries := b.groups.describe(nil)
	for _, id := range b.coordinator.Offsets().Groups() {
		if _, ok := summaries[id]; !ok {
			summaries[id] = groupSummary{state: group.Empty}
		}
	}
	newKinds := b.listGroupsOfNewKinds(req, summaries)
	wanted := func(state group.State) bool {
		if !listWanted(req.TypesFilter, "classic") {
			return false
		}
		if len(req.StatesFilter) == 0 {
			return true
		}
		for _, s := range req.StatesFilter {
			if strings.EqualFold(s, state.String()) {
				return true
			}
		}
		return false
	}
	for _, id := range sortedGroupKeys(summaries) {
		summary := summaries[id]
		if summary.state == group.Dead || !wanted(summary.state) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState = id, summary.protocolType, summary.state.String()
		rg.GroupType = "classic"
		resp.Groups = append(resp.Groups, rg)
	}
	resp.Groups = append(resp.Groups, newKinds...)
	r.respond(resp)
}
