package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/protocol"
)

// usageError is a wrong command line: exit code 2.
type usageError struct {
	command string
	message string
}

func (e *usageError) Error() string { return e.command + ": " + e.message }

func usageErrorf(command, format string, args ...any) error {
	return &usageError{command: command, message: fmt.Sprintf(format, args...)}
}

// notFoundError is a topic or group that does not exist: exit code 3.
type notFoundError struct{ message string }

func (e *notFoundError) Error() string { return e.message }

func topicNotFound(topic string) error {
	return &notFoundError{fmt.Sprintf("topic %q does not exist (see sluice topic list; create it with: sluice topic create %s)", topic, topic)}
}

func groupNotFound(group string) error {
	return &notFoundError{fmt.Sprintf("group %q does not exist (see sluice group list)", group)}
}

// unreachableError: no seed broker answered.
type unreachableError struct {
	brokers []string
	cause   error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach any broker at %s (%v); is sluiced running there? set --brokers or SLUICE_BROKERS",
		strings.Join(e.brokers, ","), e.cause)
}

func (e *unreachableError) Unwrap() error { return e.cause }

// classify maps an error to the exit code and the one line printed on stderr.
func classify(err error) (int, string) {
	if err == nil || errors.Is(err, errHelpShown) {
		return exitOK, ""
	}
	var usage *usageError
	var notFound *notFoundError
	var unreachable *unreachableError
	code := exitFailed
	message := ""
	switch {
	case errors.As(err, &usage):
		code, message = exitUsage, usage.Error()
	case errors.As(err, &notFound):
		code, message = exitNotFound, "sluice: "+notFound.Error()
	case errors.As(err, &unreachable):
		message = "sluice: " + unreachable.Error()
	case errors.Is(err, client.ErrUnknownTopic), errors.Is(err, protocol.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicOrPartition):
		code, message = exitNotFound, "sluice: "+err.Error()+" (see sluice topic list)"
	case errors.Is(err, context.DeadlineExceeded):
		message = "sluice: " + err.Error() + " (the broker did not answer in time: check it is healthy, or raise --timeout)"
	case errors.Is(err, context.Canceled):
		message = "sluice: interrupted"
		code = 130
	case errors.Is(err, client.ErrNetwork):
		message = "sluice: " + err.Error() + " (check the broker is running and --brokers / SLUICE_BROKERS)"
	default:
		message = "sluice: " + err.Error()
	}
	return code, oneLine(message)
}

// oneLine folds joined errors (which errors.Join separates by newlines) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")), " ")
}
