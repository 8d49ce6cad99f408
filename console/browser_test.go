package console

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsoleInBrowser drives headless Chromium through the console of a real sluiced process:
// a topic created with the console's form, records produced with kcat and franz-go and seen in
// the message browser (one arriving while the page is open), a consumer group whose lag shows
// and then falls to zero on the open page, and no console errors on any page. Screenshots of
// each page go to $SLUICE_TEST_OUT, else to the test's artifact directory (go test -artifacts).
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts sluiced and Chromium")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed: apt-get install -y chromium (.ci/run installs it)")
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: apt-get install -y kcat")
	}
	outDir := os.Getenv("SLUICE_TEST_OUT")
	if outDir == "" {
		outDir = t.ArtifactDir()
	} else if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startSluiced(t, "--ui-writes", "--ui-sample-interval", "250ms")
	ui := "http://" + d.http + "/ui"

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	allocator, cancelAllocator := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))...)
	defer cancelAllocator()
	browser, cancelBrowser := chromedp.NewContext(allocator)
	defer cancelBrowser()

	if err := chromedp.Do(browser); err != nil { // start the browser before subscribing to its console
		t.Fatalf("start chromium: %v", err)
	}
	// Every console message of type error or exception fails the test at the end.
	var consoleMu sync.Mutex
	var consoleErrors []string
	messages := chromedp.Console(browser)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == "error" {
				consoleMu.Lock()
				consoleErrors = append(consoleErrors, m.String())
				consoleMu.Unlock()
			}
		}
	}()
	started := time.Now()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		defer func() { t.Logf("%5.1fs %s", time.Since(started).Seconds(), what) }()
		if err := chromedp.Do(browser, steps...); err != nil {
			t.Fatalf("%s: %v\nsluiced log tail:\n%s", what, err, d.logTail(20))
		}
	}
	// await polls a JavaScript condition in the open page.
	await := func(what, condition string) {
		t.Helper()
		defer func() { t.Logf("%5.1fs %s", time.Since(started).Seconds(), what) }()
		if _, err := chromedp.Run(browser, chromedp.Poll[chromedp.Void](condition,
			chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			html, _ := chromedp.Run(browser, chromedp.OuterHTML(chromedp.CSS("main")))
			t.Fatalf("awaiting %s (%s): %v\npage:\n%s", what, condition, err, html)
		}
	}
	screenshot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(outDir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	do("open the cluster page", chromedp.Navigate(ui+"/"), chromedp.WaitVisible(chromedp.CSS("#nodes")))
	await("the node as controller", `document.querySelector("#nodes").innerText.includes("controller")`)

	// Create the topic with the console's form (writes are on, the form carries the CSRF token).
	do("create a topic",
		chromedp.Navigate(ui+"/topics"),
		chromedp.SetValue(chromedp.CSS(`#create-topic input[name=name]`), "orders"),
		chromedp.SetValue(chromedp.CSS(`#create-topic input[name=partitions]`), "2"),
		chromedp.Submit(chromedp.CSS(`#create-topic`)),
		chromedp.WaitVisible(chromedp.CSS("#partitions")))
	await("two partitions", `document.querySelectorAll("#partitions tbody tr").length == 2`)

	// franz-go: ten records to each partition, one of them binary.
	kafka, err := kgo.NewClient(kgo.SeedBrokers(d.kafka), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	var records []*kgo.Record
	for i := range 20 {
		records = append(records, &kgo.Record{Topic: "orders", Partition: int32(i % 2), Value: []byte(fmt.Sprintf("order %d", i))})
	}
	records[0].Value = []byte{0x00, 0x01, 0xfe, 0xff, 's', 'l', 'u', 'i', 'c', 'e'}
	if err := kafka.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// The message browser follows partition 0's newest records; kcat's record arrives while it
	// is open.
	do("open the message browser", chromedp.Navigate(ui+"/topics/orders/messages?partition=0"), chromedp.WaitVisible(chromedp.CSS("#messages")))
	await("the franz-go records", `document.querySelector("#messages").innerText.includes("order 18")`)
	produce := exec.CommandContext(ctx, kcat, "-b", d.kafka, "-P", "-t", "orders", "-p", "0", "-k", "order-20", "-H", "source=kcat")
	produce.Stdin = strings.NewReader(`{"id":20,"item":"tea","qty":2}` + "\n")
	if out, err := produce.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	await("kcat's record, pretty-printed", `[...document.querySelectorAll("#messages pre.json")].some(e => e.textContent.includes('"item": "tea"'))`)
	await("kcat's key and header", `document.querySelector("#messages tbody tr:last-child").innerText.includes("order-20") && document.querySelector("#messages").innerText.includes("source")`)
	screenshot("messages")
	do("open the first records", chromedp.Navigate(ui+"/topics/orders/messages?partition=0&offset=0&limit=5"), chromedp.WaitVisible(chromedp.CSS("#messages")))
	await("the binary record as hex", `document.querySelector("#offset-0 pre.hex").textContent.includes("00 01 fe ff 73 6c 75 69  63 65")`)
	screenshot("messages-hex")

	// A consumer group reads everything and commits only partition 0 up to offset 2: lag 19.
	group, err := kgo.NewClient(kgo.SeedBrokers(d.kafka), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer group.Close()
	for consumed := 0; consumed < 21; {
		fetches := group.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		consumed += fetches.NumRecords()
	}
	var commitErr error
	group.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{"orders": {0: {Epoch: -1, Offset: 2}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
			if err == nil {
				commitErr = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
			}
		})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}
	do("open the group", chromedp.Navigate(ui+"/groups/billing"), chromedp.WaitVisible(chromedp.CSS("#lag")))
	await("lag 19", `document.querySelector("#total-lag").dataset.lag == "19"`)
	await("the member with its assignment", `document.querySelector("#members").innerText.includes("orders: 0,1")`)
	await("lag samples in the chart", `document.querySelector("#lag-chart polyline") != null`)
	screenshot("group-lagging")
	// The group commits everything it read: the open page's lag falls to 0 without a reload.
	if err := group.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	await("lag 0", `document.querySelector("#total-lag").dataset.lag == "0"`)
	await("the chart's fall to 0", `document.querySelector("#lag-chart .legend li b").textContent == "0 records"`)
	screenshot("group")

	do("open the groups", chromedp.Navigate(ui+"/groups"), chromedp.WaitVisible(chromedp.CSS("#groups")))
	await("billing listed with lag 0", `document.querySelector("#groups").innerText.includes("billing") && document.querySelector("#groups td.lag").textContent == "0"`)
	screenshot("groups")
	do("open the topics", chromedp.Navigate(ui+"/topics"), chromedp.WaitVisible(chromedp.CSS("#topics")))
	await("orders with 21 records", `[...document.querySelectorAll("#topics tbody tr")].some(r => r.innerText.includes("orders") && r.innerText.includes("21"))`)
	await("a throughput sparkline", `document.querySelector("#topics svg.spark polyline").getAttribute("points") != ""`)
	screenshot("topics")
	do("open the topic", chromedp.Navigate(ui+"/topics/orders"), chromedp.WaitVisible(chromedp.CSS("#partitions")))
	screenshot("topic")
	do("open throughput", chromedp.Navigate(ui+"/throughput"), chromedp.WaitVisible(chromedp.CSS("#throughput")))
	await("a throughput line", `document.querySelector("#throughput polyline") != null`)
	screenshot("throughput")
	do("open the config", chromedp.Navigate(ui+"/config"), chromedp.WaitVisible(chromedp.CSS("#config")))
	await("broker configs", `document.querySelector("#config").innerText.includes("log.retention.ms")`)
	screenshot("config")
	do("reopen the cluster page", chromedp.Navigate(ui+"/"), chromedp.WaitVisible(chromedp.CSS("#nodes")))
	await("partition states", `/[1-9]\d* online, 0 under-replicated, 0 offline/.test(document.querySelector("#partition-states").innerText)`)
	await("a throughput line", `document.querySelector("#throughput polyline") != null`)
	screenshot("cluster")

	consoleMu.Lock()
	defer consoleMu.Unlock()
	if len(consoleErrors) > 0 {
		t.Errorf("console errors in the pages:\n%s", strings.Join(consoleErrors, "\n"))
	}
	t.Logf("screenshots in %s", outDir)
}

// sluicedProcess is a sluiced started by startSluiced.
type sluicedProcess struct {
	kafka, http string
	logMu       sync.Mutex
	log         []string
}

func (p *sluicedProcess) logTail(n int) string {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return strings.Join(p.log[max(0, len(p.log)-n):], "\n")
}

var (
	buildOnce   sync.Once
	builtBinary string
	buildErr    error
	kafkaLine   = regexp.MustCompile(`msg="broker serving" listen=(\S+)`)
	httpLine    = regexp.MustCompile(`msg="http serving" address=(\S+)`)
)

// startSluiced builds sluiced (once per test binary) and runs it on ephemeral ports with a
// temporary data dir, stopping it with SIGTERM when the test ends.
func startSluiced(t *testing.T, args ...string) *sluicedProcess {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "console-sluiced-")
		if err != nil {
			buildErr = err
			return
		}
		builtBinary = filepath.Join(dir, "sluiced")
		out, err := exec.Command("go", "build", "-o", builtBinary, "github.com/sluice-mq/sluice/cmd/sluiced").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build sluiced: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	cmd := exec.Command(builtBinary, append([]string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--raft-listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &sluicedProcess{}
	serving := make(chan struct{})
	exited := make(chan error, 1)
	go func() {
		scanner := bufio.NewScanner(stderr)
		for scanner.Scan() {
			line := scanner.Text()
			p.logMu.Lock()
			p.log = append(p.log, line)
			if m := httpLine.FindStringSubmatch(line); m != nil {
				p.http = m[1]
			}
			if m := kafkaLine.FindStringSubmatch(line); m != nil && p.kafka == "" {
				p.kafka = m[1]
				close(serving)
			}
			p.logMu.Unlock()
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("sluiced exited with %v\n%s", err, p.logTail(20))
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("sluiced did not stop on SIGTERM")
		}
	})
	select {
	case <-serving:
	case err := <-exited:
		t.Fatalf("sluiced exited before serving: %v\n%s", err, p.logTail(20))
	case <-time.After(60 * time.Second):
		t.Fatalf("sluiced did not start serving\n%s", p.logTail(20))
	}
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return p
}
