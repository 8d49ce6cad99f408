package broker

// ListTransactions v0-v1 (API 66), for operators: the transactional ids this broker coordinates,
// filtered by state names (unknown names are echoed in UnknownStateFilters), producer ids and, from
// v1, by having been open longer than DurationFilterMillis.

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/txn"
)

func (b *Broker) handleListTransactions(r *request, req *kmsg.ListTransactionsRequest) {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var states []txn.State
	for _, name := range req.StateFilters {
		if s, ok := txn.ParseState(name); ok {
			states = append(states, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	now := time.Now().UnixMilli()
	transactions := b.coordinator.Transactions()
	for _, id := range transactions.IDs() {
		if b.txns.checkOwner(id) != nil {
			continue
		}
		record, _ := b.txns.current(id) // a transaction whose markers are written reads as complete
		switch {
		case len(req.StateFilters) > 0 && !slices.Contains(states, record.State):
		case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, record.ProducerID):
		case req.Version >= 1 && req.DurationFilterMillis >= 0 && (record.StartMillis == 0 || now-record.StartMillis < req.DurationFilterMillis):
		default:
			s := kmsg.NewListTransactionsResponseTransactionState()
			s.TransactionalID, s.ProducerID, s.TransactionState = id, record.ProducerID, record.State.String()
			resp.TransactionStates = append(resp.TransactionStates, s)
		}
	}
	r.respond(resp)
}
