package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/client"
)

const csrfCookie = "sluice_console_csrf"

// csrfToken returns the form token for r's CSRF cookie, setting a new cookie when r has none.
func (c *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	cookie, err := r.Cookie(csrfCookie)
	if err != nil || len(cookie.Value) != 64 {
		secret := make([]byte, 32)
		rand.Read(secret)
		cookie = &http.Cookie{Name: csrfCookie, Value: hex.EncodeToString(secret), Path: "/ui",
			HttpOnly: true, SameSite: http.SameSiteStrictMode}
		http.SetCookie(w, cookie)
	}
	return c.csrfFor(cookie.Value)
}

func (c *Console) csrfFor(cookie string) string {
	mac := hmac.New(sha256.New, c.csrfKey)
	mac.Write([]byte(cookie))
	return hex.EncodeToString(mac.Sum(nil))
}

// checkCSRF refuses a POST whose form token does not match its cookie, or that comes from a page
// of another origin.
func (c *Console) checkCSRF(r *http.Request) error {
	if origin := r.Header.Get("Origin"); origin != "" && origin != "null" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return fmt.Errorf("console: request from origin %q refused", origin)
		}
	}
	cookie, err := r.Cookie(csrfCookie)
	if err != nil {
		return errors.New("console: no CSRF cookie: reload the page and try again")
	}
	if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(c.csrfFor(cookie.Value))) {
		return errors.New("console: CSRF token does not match: reload the page and try again")
	}
	return nil
}

// write wraps a POST handler: writes must be on, the CSRF token must match and Config.Authorize
// (when set) must allow the action on the resource named by the path value resource (the
// form's "name" for create-topic). do returns where to go next.
func (c *Console) write(operation, resource string, do func(ctx context.Context, r *http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !c.cfg.Writes {
			c.fail(w, r, http.StatusForbidden, errors.New("console: read-only (start sluiced with --ui-writes to change the cluster from here)"))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := c.checkCSRF(r); err != nil {
			c.fail(w, r, http.StatusForbidden, err)
			return
		}
		action := Action{Operation: operation, Resource: r.PostFormValue("name")}
		if resource != "" {
			action.Resource = r.PathValue(resource)
		}
		if c.cfg.Authorize != nil {
			if err := c.cfg.Authorize(r, action); err != nil {
				c.fail(w, r, http.StatusForbidden, err)
				return
			}
		}
		ctx, cancel := c.requestContext(r)
		defer cancel()
		next, err := do(ctx, r)
		var bad badInput
		if errors.As(err, &bad) {
			c.fail(w, r, http.StatusBadRequest, err)
			return
		}
		if err != nil {
			c.fail(w, r, statusOf(err), err)
			return
		}
		c.logger.Info("console: write", "operation", operation, "resource", action.Resource, "user", userOf(r), "remote", r.RemoteAddr)
		http.Redirect(w, r, next, http.StatusSeeOther)
	}
}

// badInput is a form the console refuses before asking the cluster.
type badInput struct{ error }

func formInt(r *http.Request, field string, fallback, low, high int64) (int64, error) {
	s := strings.TrimSpace(r.PostFormValue(field))
	if s == "" {
		return fallback, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < low || n > high {
		return 0, badInput{fmt.Errorf("console: %s %q: want a number from %d to %d", field, s, low, high)}
	}
	return n, nil
}

func (c *Console) createTopic(ctx context.Context, r *http.Request) (string, error) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	if name == "" {
		return "", badInput{errors.New("console: a topic needs a name")}
	}
	partitions, err := formInt(r, "partitions", -1, -1, 1<<20)
	if err != nil {
		return "", err
	}
	replicationFactor, err := formInt(r, "replication_factor", -1, -1, 1<<10)
	if err != nil {
		return "", err
	}
	spec := client.TopicSpec{Name: name, Partitions: int32(partitions), ReplicationFactor: int16(replicationFactor)}
	if err := client.NewAdmin(kafkaOf(r).client).CreateTopics(ctx, spec); err != nil {
		return "", fmt.Errorf("console: create topic %s: %w", name, err)
	}
	return "/ui/topics/" + url.PathEscape(name), nil
}

func (c *Console) deleteTopic(ctx context.Context, r *http.Request) (string, error) {
	name := r.PathValue("topic")
	if r.PostFormValue("confirm") != name {
		return "", badInput{fmt.Errorf("console: type the topic's name (%s) to delete it", name)}
	}
	if err := client.NewAdmin(kafkaOf(r).client).DeleteTopics(ctx, name); err != nil {
		return "", fmt.Errorf("console: delete topic %s: %w", name, err)
	}
	return "/ui/topics", nil
}

// resetOffsets commits, for every partition of the form's topic, its log start ("earliest"), log
// end ("latest") or a given offset, as the group's offset. The broker refuses while the group has
// members (they would overwrite it).
func (c *Console) resetOffsets(ctx context.Context, r *http.Request) (string, error) {
	group, topic, to := r.PathValue("group"), r.PostFormValue("topic"), r.PostFormValue("to")
	cluster, err := cluster(ctx, kafkaOf(r), topic)
	if err != nil {
		return "", err
	}
	state, ok := cluster.topic(topic)
	if !ok || state.Error != "" {
		return "", badInput{fmt.Errorf("console: unknown topic %q", topic)}
	}
	exact, err := formInt(r, "offset", -1, 0, 1<<62)
	if err != nil {
		return "", err
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, -1, ""
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for _, p := range state.Partitions {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch = p.Partition, -1
		switch to {
		case "earliest":
			rp.Offset = p.LogStart
		case "latest":
			rp.Offset = p.LogEnd
		case "offset":
			if exact < 0 {
				return "", badInput{errors.New("console: give the offset to reset to")}
			}
			rp.Offset = min(max(exact, p.LogStart), p.LogEnd)
		default:
			return "", badInput{fmt.Errorf("console: reset to %q: want earliest, latest or offset", to)}
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, kafkaOf(r).raw)
	if err != nil {
		return "", fmt.Errorf("console: reset offsets of %s: %w", group, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				hint := ""
				if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress) {
					hint = " (the group has active members: stop them first)"
				}
				return "", fmt.Errorf("console: reset offsets of %s, %s-%d: %w%s", group, t.Topic, p.Partition, err, hint)
			}
		}
	}
	return "/ui/groups/" + url.PathEscape(group), nil
}

func (c *Console) deleteGroup(ctx context.Context, r *http.Request) (string, error) {
	group := r.PathValue("group")
	if r.PostFormValue("confirm") != group {
		return "", badInput{fmt.Errorf("console: type the group's name (%s) to delete it", group)}
	}
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, kafkaOf(r).raw)
	if err != nil {
		return "", fmt.Errorf("console: delete group %s: %w", group, err)
	}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return "", fmt.Errorf("console: delete group %s: %w", group, err)
		}
	}
	return "/ui/groups", nil
}
