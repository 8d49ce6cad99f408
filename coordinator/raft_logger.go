package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// raftLogger adapts hashicorp/raft's hclog output to a *slog.Logger. Level
// filtering is the slog handler's business, so SetLevel does nothing.
type raftLogger struct {
	// root carries the implied arguments but not the name; logger adds the
	// name as a "subsystem" attribute.
	root        *slog.Logger
	logger      *slog.Logger
	name        string
	impliedArgs []any
}

var _ hclog.Logger = (*raftLogger)(nil)

func newRaftLogger(logger *slog.Logger) *raftLogger {
	return &raftLogger{root: logger, logger: logger.With("subsystem", "raft"), name: "raft"}
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (l *raftLogger) Log(level hclog.Level, message string, args ...any) {
	if level == hclog.Off {
		return
	}
	if !l.logger.Enabled(context.Background(), slogLevel(level)) {
		return
	}
	copied := false
	for i, arg := range args {
		// hclog.Fmt("%+v", value) defers formatting to the logger.
		if format, ok := arg.(hclog.Format); ok && len(format) > 0 {
			if pattern, ok := format[0].(string); ok {
				if !copied { // the caller's slice is not ours to change
					args, copied = slices.Clone(args), true
				}
				args[i] = fmt.Sprintf(pattern, format[1:]...)
			}
		}
	}
	l.logger.Log(context.Background(), slogLevel(level), message, args...)
}

func (l *raftLogger) Trace(message string, args ...any) { l.Log(hclog.Trace, message, args...) }
func (l *raftLogger) Debug(message string, args ...any) { l.Log(hclog.Debug, message, args...) }
func (l *raftLogger) Info(message string, args ...any)  { l.Log(hclog.Info, message, args...) }
func (l *raftLogger) Warn(message string, args ...any)  { l.Log(hclog.Warn, message, args...) }
func (l *raftLogger) Error(message string, args ...any) { l.Log(hclog.Error, message, args...) }

func (l *raftLogger) enabled(level hclog.Level) bool {
	return l.logger.Enabled(context.Background(), slogLevel(level))
}

func (l *raftLogger) IsTrace() bool { return l.enabled(hclog.Trace) }
func (l *raftLogger) IsDebug() bool { return l.enabled(hclog.Debug) }
func (l *raftLogger) IsInfo() bool  { return l.enabled(hclog.Info) }
func (l *raftLogger) IsWarn() bool  { return l.enabled(hclog.Warn) }
func (l *raftLogger) IsError() bool { return l.enabled(hclog.Error) }

func (l *raftLogger) ImpliedArgs() []any { return l.impliedArgs }

func (l *raftLogger) With(args ...any) hclog.Logger {
	implied := append(append([]any(nil), l.impliedArgs...), args...)
	root := l.root.With(args...)
	return &raftLogger{root: root, logger: withName(root, l.name), name: l.name, impliedArgs: implied}
}

func (l *raftLogger) Name() string { return l.name }

func (l *raftLogger) Named(name string) hclog.Logger {
	if l.name != "" {
		name = l.name + "." + name
	}
	return l.ResetNamed(name)
}

func (l *raftLogger) ResetNamed(name string) hclog.Logger {
	return &raftLogger{root: l.root, logger: withName(l.root, name), name: name, impliedArgs: l.impliedArgs}
}

func withName(logger *slog.Logger, name string) *slog.Logger {
	if name == "" {
		return logger
	}
	return logger.With("subsystem", name)
}

func (l *raftLogger) SetLevel(hclog.Level) {}

func (l *raftLogger) GetLevel() hclog.Level {
	for _, level := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if l.enabled(level) {
			return level
		}
	}
	return hclog.Off
}

func (l *raftLogger) StandardLogger(options *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(options), "", 0)
}

func (l *raftLogger) StandardWriter(options *hclog.StandardLoggerOptions) io.Writer {
	writer := &raftLogWriter{logger: l, level: hclog.Info}
	if options != nil {
		writer.inferLevels = options.InferLevels
		if options.ForceLevel != hclog.NoLevel {
			writer.level, writer.inferLevels = options.ForceLevel, false
		}
	}
	return writer
}

// raftLogWriter turns standard-library log lines into log records, reading
// "[ERR]"-style prefixes when asked to infer levels.
type raftLogWriter struct {
	logger      *raftLogger
	level       hclog.Level
	inferLevels bool
}

func (w *raftLogWriter) Write(line []byte) (int, error) {
	message := string(bytes.TrimRight(line, " \t\r\n"))
	level := w.level
	if w.inferLevels {
		for prefix, inferred := range map[string]hclog.Level{
			"[TRACE]": hclog.Trace, "[DEBUG]": hclog.Debug, "[INFO]": hclog.Info,
			"[WARN]": hclog.Warn, "[ERR]": hclog.Error, "[ERROR]": hclog.Error,
		} {
			if rest, found := strings.CutPrefix(message, prefix); found {
				message, level = strings.TrimSpace(rest), inferred
				break
			}
		}
	}
	w.logger.Log(level, message)
	return len(line), nil
}
