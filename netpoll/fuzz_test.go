package netpoll

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"testing"
)

// FuzzInboundBytes throws arbitrary bytes at a live server: it must never panic, must end
// every such connection (echoing whatever whole frames there were), and must keep serving
// another connection.
func FuzzInboundBytes(f *testing.F) {
	f.Add(frame([]byte("valid")))
	f.Add(append(frame([]byte("one")), frame([]byte("two"))...))
	f.Add(frame([]byte("truncated"))[:7])
	f.Add(binary.BigEndian.AppendUint32(nil, 1<<31))
	f.Add(binary.BigEndian.AppendUint32(nil, 0x7fffffff))
	f.Add(binary.BigEndian.AppendUint32(nil, 0))
	f.Add([]byte{0xff})
	f.Add([]byte{})

	cfg := testConfig(f)
	cfg.Logger = slog.New(slog.DiscardHandler) // f.Log is off limits inside the fuzz target
	cfg.MaxFrameBytes = 1 << 12
	cfg.MaxInFlightBytes = 1 << 12
	server := startServer(f, cfg, echoHandler())
	healthy := dial(f, server)

	f.Fuzz(func(t *testing.T, input []byte) {
		client := dial(t, server)
		_, _ = client.conn.Write(input)
		_ = client.conn.CloseWrite()
		var echoed int
		for {
			payload, err := client.readFrame()
			if err != nil {
				break
			}
			echoed += frameHeaderBytes + len(payload)
		}
		if echoed > len(input) {
			t.Fatalf("server echoed %d bytes for %d bytes of input", echoed, len(input))
		}
		healthy.t = t
		healthy.send([]byte("ping"))
		if got := healthy.mustReadFrame(); !bytes.Equal(got, []byte("ping")) {
			t.Fatalf("healthy connection got %q", got)
		}
	})
}
