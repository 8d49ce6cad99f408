package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/client"
)

func (c *Console) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
}

type clusterBody struct {
	Cluster    *clusterState
	Partitions int
	Throughput template.HTML
}

func (c *Console) clusterPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.requestContext(r)
	defer cancel()
	cluster, err := metadata(ctx, c.raw)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	fillSizes(ctx, c.raw, cluster)
	body := clusterBody{Cluster: cluster, Partitions: cluster.Online + cluster.UnderReplicated + cluster.Offline}
	body.Throughput = lineChart([]chartSeries{{"records in", totalRate(c.samples.snapshot())}}, time.Now(), c.rateSpan(), "/s", 720, 180)
	c.render(w, r, http.StatusOK, "cluster", "Cluster", "cluster", body)
}

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
	cluster, err := c.cluster(ctx)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	var names []string
	for _, t := range cluster.Topics {
		names = append(names, t.Name)
	}
	configs := topicConfigs(ctx, c.raw, names)
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

// cluster is the whole cluster with offsets and sizes.
func (c *Console) cluster(ctx context.Context, topics ...string) (*clusterState, error) {
	cluster, err := metadata(ctx, c.raw, topics...)
	if err != nil {
		return nil, err
	}
	if err := fillOffsets(ctx, c.raw, cluster); err != nil {
		return nil, err
	}
	fillSizes(ctx, c.raw, cluster)
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
	configs, err := describeConfigs(ctx, c.raw, kmsg.ConfigResourceTypeTopic, name)
	if err != nil {
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
	cluster, err := c.cluster(ctx, name)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
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
	case consumer = <-c.messages:
	case <-ctx.Done():
		c.fail(w, r, http.StatusServiceUnavailable, errors.New("console: the message browser is busy; try again"))
		return
	}
	body.Result, err = browse(ctx, consumer, name, query, body.Partition.LogStart, body.Partition.LogEnd)
	c.messages <- consumer
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

func (c *Console) groupsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.requestContext(r)
	defer cancel()
	groups, err := listGroups(ctx, c.raw)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	// Lag now: one sample's worth of requests (metadata, offsets, each group's commits).
	now, err := takeSample(ctx, c.raw, c.client, c.cfg, time.Now())
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	for _, g := range groups {
		req.Groups = append(req.Groups, g.Name)
	}
	members := map[string]int{}
	if len(req.Groups) > 0 {
		if resp, err := req.RequestWith(ctx, c.raw); err == nil {
			for _, g := range resp.Groups {
				members[g.Group] = len(g.Members)
			}
		}
	}
	for i := range groups {
		g := &groups[i]
		g.Members = members[g.Name]
		lags, ok := now.GroupLags[g.Name]
		g.HasOffsets = ok && len(lags) > 0
		for _, lag := range lags {
			g.TotalLag += lag
		}
	}
	c.render(w, r, http.StatusOK, "groups", "Groups", "groups", groups)
}

type groupBody struct {
	Group  *groupState
	Topics []string
	Lag    template.HTML
}

func (c *Console) groupPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	ctx, cancel := c.requestContext(r)
	defer cancel()
	group, _, err := describeGroup(ctx, c.raw, name)
	if errors.Is(err, errGroupNotFound) {
		group, err = c.describeShareGroup(ctx, name)
	}
	if errors.Is(err, errGroupNotFound) {
		c.fail(w, r, http.StatusNotFound, err)
		return
	}
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	body := groupBody{Group: group}
	seen := map[string]bool{}
	for _, o := range group.Offsets {
		if !seen[o.Topic] {
			seen[o.Topic] = true
			body.Topics = append(body.Topics, o.Topic)
		}
	}
	total, partitions := groupLagSeries(c.samples.snapshot(), name, 6)
	series := []chartSeries{{"total lag", total}}
	var keys []topicPartition
	for tp := range partitions {
		keys = append(keys, tp)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].Topic < keys[j].Topic || (keys[i].Topic == keys[j].Topic && keys[i].Partition < keys[j].Partition)
	})
	for _, tp := range keys {
		series = append(series, chartSeries{fmt.Sprintf("%s-%d", tp.Topic, tp.Partition), partitions[tp]})
	}
	body.Lag = lineChart(series, time.Now(), c.rateSpan(), " records", 720, 180)
	c.render(w, r, http.StatusOK, "group", "Group "+name, "groups", body)
}

type throughputRow struct {
	Topic     string
	Rate      float64 // records/s
	BytesRate float64
}

type throughputBody struct {
	Chart      template.HTML // records/s
	BytesChart template.HTML
	Rows       []throughputRow
	TopicsCut  bool
}

// latest is the last point's value, 0 without points.
func latest(points []point) float64 {
	if n := len(points); n > 0 {
		return points[n-1].Value
	}
	return 0
}

func (c *Console) throughputPage(w http.ResponseWriter, r *http.Request) {
	samples, now := c.samples.snapshot(), time.Now()
	body := throughputBody{}
	topics := map[string]bool{}
	for _, s := range samples {
		for topic := range s.TopicEnds {
			topics[topic] = true
		}
		body.TopicsCut = body.TopicsCut || s.TopicsCut
	}
	rates, byteRates := map[string][]point{}, map[string][]point{}
	for topic := range topics {
		rates[topic], byteRates[topic] = topicRate(samples, topic), topicBytesRate(samples, topic)
		body.Rows = append(body.Rows, throughputRow{topic, latest(rates[topic]), latest(byteRates[topic])})
	}
	sort.Slice(body.Rows, func(i, j int) bool {
		a, b := body.Rows[i], body.Rows[j]
		return a.Rate > b.Rate || (a.Rate == b.Rate && a.Topic < b.Topic)
	})
	series := []chartSeries{{"all topics", totalRate(samples)}}
	byteSeries := []chartSeries{{"all topics", totalBytesRate(samples)}}
	for _, row := range body.Rows[:min(len(body.Rows), 7)] {
		series = append(series, chartSeries{row.Topic, rates[row.Topic]})
		byteSeries = append(byteSeries, chartSeries{row.Topic, byteRates[row.Topic]})
	}
	body.Chart = lineChart(series, now, c.rateSpan(), "/s", 900, 240)
	body.BytesChart = lineChart(byteSeries, now, c.rateSpan(), " B/s", 900, 240)
	c.render(w, r, http.StatusOK, "throughput", "Throughput", "throughput", body)
}

type configBody struct {
	Brokers []brokerState
	Node    int32
	Configs []configEntry
}

func (c *Console) configPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.requestContext(r)
	defer cancel()
	cluster, err := metadata(ctx, c.raw)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	body := configBody{Brokers: cluster.Brokers, Node: -1}
	for _, b := range cluster.Brokers {
		if !b.Fenced && (body.Node < 0 || b.Controller) {
			body.Node = b.NodeID
		}
	}
	if s := r.URL.Query().Get("node"); s != "" {
		node, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			c.fail(w, r, http.StatusBadRequest, fmt.Errorf("node %q: want a node id", s))
			return
		}
		body.Node = int32(node)
	}
	if body.Configs, err = describeConfigs(ctx, c.raw, kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(body.Node))); err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	c.render(w, r, http.StatusOK, "config", "Broker config", "config", body)
}
