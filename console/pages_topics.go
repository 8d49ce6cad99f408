package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/client"
)

type topicRow struct {
	topicState
	Records, Size      int64
	RF                 int
	Retention, Cleanup string
	UnderReplicated    int
	Offline            int
	Sparkline          template.HTML
}

func (c *Console) topicsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.requestContext(r)
	defer cancel()
	k := kafkaOf(r)
	cluster, err := cluster(ctx, k)
	if err != nil {
		c.fail(w, r, statusOf(err), err)
		return
	}
	var names []string
	for _, t := range cluster.Topics {
		names = append(names, t.Name)
	}
	configs := topicConfigs(ctx, k.raw, names)
	samples, now := c.samples.snapshot(), time.Now()
	var rows []topicRow
	for _, t := range cluster.Topics {
		row := topicRow{topicState: t, Records: t.records(), Size: t.sizeBytes(), RF: t.replicationFactor(),
			Retention: retentionText(configs[t.Name]), Cleanup: configs[t.Name]["cleanup.policy"],
			Sparkline: sparkline(topicRate(samples, t.Name), now, c.rateSpan())}
		for _, p := range t.Partitions {
			switch p.State() {
			case "offline":
				row.Offline++
			case "under-replicated":
				row.UnderReplicated++
			}
		}
		rows = append(rows, row)
	}
	c.render(w, r, http.StatusOK, "topics", "Topics", "topics", rows)
}

// cluster is the whole cluster (or the named topics) with offsets and sizes, as k's principal
// may see it.
func cluster(ctx context.Context, k *kafkaClients, topics ...string) (*clusterState, error) {
	cluster, err := metadata(ctx, k.raw, topics...)
	if err != nil {
		return nil, err
	}
	if err := fillOffsets(ctx, k.raw, cluster); err != nil {
		return nil, err
	}
	fillSizes(ctx, k.raw, cluster)
	return cluster, nil
}

// topicConfigs asks for the configs of the named topics in one DescribeConfigs; a topic whose
// configs fail is left out.
func topicConfigs(ctx context.Context, raw kmsg.Requestor, names []string) map[string]map[string]string {
	out := map[string]map[string]string{}
	if len(names) == 0 {
		return out
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range names {
		resource := kmsg.NewDescribeConfigsRequestResource()
		resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeTopic, name
		req.Resources = append(req.Resources, resource)
	}
	resp, err := req.RequestWith(ctx, raw)
	if err != nil {
		return out
	}
	for _, res := range resp.Resources {
		if res.ErrorCode != 0 {
			continue
		}
		configs := map[string]string{}
		for _, entry := range res.Configs {
			if entry.Value != nil {
				configs[entry.Name] = *entry.Value
			}
		}
		out[res.ResourceName] = configs
	}
	return out
}

// retentionText says how long and how much a topic keeps.
func retentionText(configs map[string]string) string {
	if configs == nil {
		return "-"
	}
	text := "forever"
	if ms, err := strconv.ParseInt(configs["retention.ms"], 10, 64); err == nil && ms >= 0 {
		text = (time.Duration(ms) * time.Millisecond).String()
		if ms%(3600*1000) == 0 {
			text = fmt.Sprintf("%dh", ms/3600/1000)
		}
	}
	if n, err := strconv.ParseInt(configs["retention.bytes"], 10, 64); err == nil && n >= 0 {
		text += ", " + bytesText(n) + "/partition"
	}
	return text
}

type topicBody struct {
	Topic      topicRow
	Configs    []configEntry
	Throughput template.HTML
	Brokers    map[int32]string
}

func (c *Console) topicPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	ctx, cancel := c.requestContext(r)
	defer cancel()
	topic, cluster, ok := c.knownTopic(ctx, w, r, name)
	if !ok {
		return
	}
	configs, err := describeConfigs(ctx, kafkaOf(r).raw, kmsg.ConfigResourceTypeTopic, name)
	if err != nil && statusOf(err) != http.StatusForbidden { // without DESCRIBE_CONFIGS: no configs
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	values := map[string]string{}
	for _, entry := range configs {
		values[entry.Name] = entry.Value
	}
	body := topicBody{Configs: configs, Brokers: map[int32]string{}}
	for _, b := range cluster.Brokers {
		body.Brokers[b.NodeID] = b.Address
	}
	body.Topic = topicRow{topicState: topic, Records: topic.records(), Size: topic.sizeBytes(), RF: topic.replicationFactor(),
		Retention: retentionText(values), Cleanup: values["cleanup.policy"]}
	body.Throughput = lineChart([]chartSeries{{name + " records in", topicRate(c.samples.snapshot(), name)}}, time.Now(), c.rateSpan(), "/s", 720, 160)
	c.render(w, r, http.StatusOK, "topic", "Topic "+name, "topics", body)
}

// knownTopic loads one topic with offsets and sizes, or renders 404 (or 502) and reports false.
func (c *Console) knownTopic(ctx context.Context, w http.ResponseWriter, r *http.Request, name string) (topicState, *clusterState, bool) {
	cluster, err := cluster(ctx, kafkaOf(r), name)
	if err != nil {
		c.fail(w, r, statusOf(err), err)
		return topicState{}, nil, false
	}
	topic, ok := cluster.topic(name)
	if !ok || topic.Error != "" {
		reason := "unknown topic"
		if ok && !topic.Unknown {
			reason = topic.Error
		}
		c.fail(w, r, http.StatusNotFound, fmt.Errorf("topic %q: %s", name, reason))
		return topicState{}, nil, false
	}
	return topic, cluster, true
}

type messagesBody struct {
	Topic      string
	Partitions []partitionState
	Query      browseQuery
	Partition  partitionState
	Result     browseResult
	TimeInput  string
	// Tail is set when neither offset nor time was given: the page follows the newest records.
	Tail bool
	// Older and Newer start the neighbouring pages (-1: none).
	Older, Newer int64
}

func (c *Console) messagesPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	query, err := parseBrowseQuery(r.URL.Query())
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := c.requestContext(r)
	defer cancel()
	topic, _, ok := c.knownTopic(ctx, w, r, name)
	if !ok {
		return
	}
	body := messagesBody{Topic: name, Partitions: topic.Partitions, Query: query, Older: -1, Newer: -1,
		Tail: query.Offset < 0 && query.Time.IsZero()}
	found := false
	for _, p := range topic.Partitions {
		if p.Partition == query.Partition {
			body.Partition, found = p, true
		}
	}
	if !found {
		c.fail(w, r, http.StatusNotFound, fmt.Errorf("topic %q has no partition %d", name, query.Partition))
		return
	}
	if !query.Time.IsZero() {
		body.TimeInput = query.Time.UTC().Format(timeLayout)
	}
	var consumer *client.Consumer
	select {
	case consumer = <-kafkaOf(r).messages:
	case <-ctx.Done():
		c.fail(w, r, http.StatusServiceUnavailable, errors.New("console: the message browser is busy; try again"))
		return
	}
	body.Result, err = browse(ctx, consumer, name, query, body.Partition.LogStart, body.Partition.LogEnd)
	kafkaOf(r).messages <- consumer
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	if body.Result.Start > body.Partition.LogStart {
		body.Older = max(body.Partition.LogStart, body.Result.Start-int64(query.Limit))
	}
	if body.Result.End < body.Partition.LogEnd {
		body.Newer = body.Result.End
	}
	c.render(w, r, http.StatusOK, "messages", "Messages of "+name, "topics", body)
}
