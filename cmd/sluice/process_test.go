package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests run the real binaries: sluice as the user would, against a sluiced on ephemeral ports
// with its own data directory.
var sluiceBinary, sluicedBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sluiceBinary, sluicedBinary = filepath.Join(dir, "sluice"), filepath.Join(dir, "sluiced")
	for binary, pkg := range map[string]string{sluiceBinary: ".", sluicedBinary: "../sluiced"} {
		build := exec.Command("go", "build", "-o", binary, pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var servingLine = regexp.MustCompile(`msg="broker serving" listen=(\S+)`)

// startSluiced starts a broker and returns its Kafka address; the test's cleanup stops it.
func startSluiced(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(sluicedBinary, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--raft-listen", "127.0.0.1:0", "--segment-bytes", "16777216")
	address := waitForLine(t, cmd, servingLine)
	return address
}

// waitForLine starts cmd and waits until its stderr has a line matching pattern, returning the
// first submatch; cleanup sends SIGTERM and waits for the process.
func waitForLine(t *testing.T, cmd *exec.Cmd, pattern *regexp.Regexp) string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	found := make(chan string, 1)
	var log bytes.Buffer
	go func() {
		defer close(exited)
		scanner := bufio.NewScanner(stderr)
		sent := false
		for scanner.Scan() {
			if len(log.String()) < 64<<10 {
				log.WriteString(scanner.Text() + "\n")
			}
			if m := pattern.FindStringSubmatch(scanner.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case value := <-found:
		return value
	case <-exited:
		t.Fatalf("%s exited before printing %s", cmd.Path, pattern)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not print %s", cmd.Path, pattern)
	}
	return ""
}

// result is one finished sluice invocation.
type result struct {
	stdout, stderr string
	code           int
}

// sluice runs the CLI with args (and stdin, if not nil) and SLUICE_BROKERS set to brokers.
func sluice(t *testing.T, brokers string, stdin io.Reader, args ...string) result {
	t.Helper()
	cmd := exec.Command(sluiceBinary, args...)
	cmd.Env = append(os.Environ(), "SLUICE_BROKERS="+brokers)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("sluice %s: %v", strings.Join(args, " "), err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// ok runs sluice and fails the test unless it exits 0.
func ok(t *testing.T, brokers string, stdin io.Reader, args ...string) result {
	t.Helper()
	r := sluice(t, brokers, stdin, args...)
	if r.code != 0 {
		t.Fatalf("sluice %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}
