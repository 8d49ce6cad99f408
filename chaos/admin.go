package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/chaos/history"
)

// churn creates, reconfigures, grows and deletes throwaway topics during the faults, and changes
// the main topic's retention config back and forth: metadata changes racing with failures.
func (w *workload) churn(client *kgo.Client, process string) {
	defer w.others.Done()
	defer client.Close()
	ctx, cancel := untilStopped(w.stopAll)
	defer cancel()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	op := int64(0)
	do := func(detail string, call func(context.Context) error) {
		op++
		w.recorder.Record(history.Event{Process: process, Type: history.Invoke, F: history.Admin, Op: op, Detail: detail})
		callCtx, cancelCall := context.WithTimeout(ctx, 10*time.Second)
		err := call(callCtx)
		cancelCall()
		if err != nil {
			w.recorder.Record(history.Event{Process: process, Type: history.Info, F: history.Admin, Op: op, Detail: detail, Error: errorText(err)})
			return
		}
		w.recorder.Record(history.Event{Process: process, Type: history.OK, F: history.Admin, Op: op, Detail: detail})
	}
	for round := 0; ; round++ {
		name := fmt.Sprintf("churn-%d", round/4)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		switch round % 4 {
		case 0:
			do("create "+name, func(ctx context.Context) error {
				return createTopic(ctx, client, name, 2, int16(min(3, w.config.Nodes)), map[string]string{"min.insync.replicas": "2"})
			})
		case 1:
			do("alter-config "+name+" retention.ms", func(ctx context.Context) error {
				return alterConfig(ctx, client, name, "retention.ms", fmt.Sprint(3600_000+round))
			})
			do("alter-config "+w.topic+" segment.ms", func(ctx context.Context) error {
				return alterConfig(ctx, client, w.topic, "segment.ms", fmt.Sprint(600_000+round))
			})
		case 2:
			do("create-partitions "+name+" 3", func(ctx context.Context) error { return createPartitions(ctx, client, name, 3) })
		case 3:
			do("delete "+name, func(ctx context.Context) error { return deleteTopic(ctx, client, name) })
		}
	}
}

func alterConfig(ctx context.Context, client *kgo.Client, topic, name, value string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	resource := kmsg.NewIncrementalAlterConfigsRequestResource()
	resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	config := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	config.Name, config.Value, config.Op = name, kmsg.StringPtr(value), kmsg.IncrementalAlterConfigOpSet
	resource.Configs = append(resource.Configs, config)
	req.Resources = append(req.Resources, resource)
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return err
		}
	}
	return nil
}

func createPartitions(ctx context.Context, client *kgo.Client, topic string, count int32) error {
	req := kmsg.NewPtrCreatePartitionsRequest()
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count = topic, count
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 10_000
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return err
	}
	for _, r := range resp.Topics {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return err
		}
	}
	return nil
}

func deleteTopic(ctx context.Context, client *kgo.Client, topic string) error {
	req := kmsg.NewPtrDeleteTopicsRequest()
	t := kmsg.NewDeleteTopicsRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	req.TopicNames = append(req.TopicNames, topic)
	req.TimeoutMillis = 10_000
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return err
	}
	for _, r := range resp.Topics {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return err
		}
	}
	return nil
}
