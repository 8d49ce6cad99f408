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
	k := kafkaOf(r)
	cluster, err := metadata(ctx, k.raw)
	if err != nil {
		c.fail(w, r, statusOf(err), err)
		return
	}
	fillSizes(ctx, k.raw, cluster)
	body := clusterBody{Cluster: cluster, Partitions: cluster.Online + cluster.UnderReplicated + cluster.Offline}
	body.Throughput = lineChart([]chartSeries{{"records in", totalRate(c.visibleSamples(ctx, r))}}, time.Now(), c.rateSpan(), "/s", 720, 180)
	c.render(w, r, http.StatusOK, "cluster", "Cluster", "cluster", body)
}

func (c *Console) groupsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.requestContext(r)
	defer cancel()
	k := kafkaOf(r)
	groups, err := listGroups(ctx, k.raw)
	if err != nil {
		c.fail(w, r, statusOf(err), err)
		return
	}
	// Lag now: one sample's worth of requests (metadata, offsets, each group's commits).
	now, err := takeSample(ctx, k.raw, k.client, c.cfg, time.Now())
	if err != nil {
		c.fail(w, r, statusOf(err), err)
		return
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	for _, g := range groups {
		req.Groups = append(req.Groups, g.Name)
	}
	members := map[string]int{}
	if len(req.Groups) > 0 {
		if resp, err := req.RequestWith(ctx, k.raw); err == nil {
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
	k := kafkaOf(r)
	group, _, err := describeGroup(ctx, k.raw, name)
	if errors.Is(err, errGroupNotFound) {
		group, err = c.describeShareGroup(ctx, k, name)
	}
	if errors.Is(err, errGroupNotFound) {
		c.fail(w, r, http.StatusNotFound, err)
		return
	}
	if err != nil {
		c.fail(w, r, statusOf(err), err)
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
	total, partitions := groupLagSeries(c.visibleSamples(ctx, r), name, 6)
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
	ctx, cancel := c.requestContext(r)
	defer cancel()
	samples, now := c.visibleSamples(ctx, r), time.Now()
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
	k := kafkaOf(r)
	cluster, err := metadata(ctx, k.raw)
	if err != nil {
		c.fail(w, r, statusOf(err), err)
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
	if body.Configs, err = describeConfigs(ctx, k.raw, kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(body.Node))); err != nil {
		c.fail(w, r, statusOf(err), err)
		return
	}
	c.render(w, r, http.StatusOK, "config", "Broker config", "config", body)
}
