package main

import (
	"log/slog"
	"net"

	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/console"
)

// startConsole starts the web console (package console) as a Kafka client of b's own listener and
// mounts it in ui; nil without an HTTP listener.
func startConsole(opts options, b *broker.Broker, logger *slog.Logger, ui *console.Lazy) (*console.Console, error) {
	if opts.http == "" {
		return nil, nil
	}
	opts.ui.Brokers, opts.ui.Logger = []string{dialable(b.Addr())}, logger
	web, err := console.New(opts.ui)
	if err != nil {
		return nil, err
	}
	ui.Set(web)
	if host, _, _ := net.SplitHostPort(opts.http); opts.ui.Writes && !isLoopback(host) {
		logger.Warn("--ui-writes on a non-loopback --http address: anyone who reaches it can create and delete topics (the console has no login yet)", "http", opts.http)
	}
	return web, nil
}

// dialable turns a listener's address into one this process can dial (a wildcard host becomes
// loopback).
func dialable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
