package coordinator

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestRaftLoggerAdaptsToSlog(t *testing.T) {
	var output bytes.Buffer
	logger := newRaftLogger(slog.New(slog.NewTextHandler(&output, &slog.HandlerOptions{Level: slog.LevelInfo})))
	named := logger.Named("snapshot").With("node", 1)
	named.Info("restored", "servers", hclog.Fmt("%d voters", 3))
	named.Debug("hidden")
	named.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[WARN] from the standard logger")
	text := output.String()
	for _, want := range []string{"msg=restored", "subsystem=raft.snapshot", "node=1", `servers="3 voters"`, "level=WARN", `msg="from the standard logger"`} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "hidden") {
		t.Errorf("a debug line passed an info handler:\n%s", text)
	}
	if named.IsDebug() || !named.IsInfo() || named.GetLevel() != hclog.Info {
		t.Errorf("levels: debug %v info %v level %v", named.IsDebug(), named.IsInfo(), named.GetLevel())
	}
}
