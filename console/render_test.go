package console

import (
	"strings"
	"testing"
	"time"
)

func TestRenderValue(t *testing.T) {
	check := func(raw []byte, kind, text string) {
		t.Helper()
		got := renderValue(raw)
		if got.Kind != kind || got.Text != text {
			t.Errorf("renderValue(%q) = %s %q, want %s %q", raw, got.Kind, got.Text, kind, text)
		}
	}
	check(nil, "null", "null")
	check([]byte{}, "empty", "(empty)")
	check([]byte(`{"id":1,"tags":["a","b"]}`), "json", "{\n  \"id\": 1,\n  \"tags\": [\n    \"a\",\n    \"b\"\n  ]\n}")
	check([]byte(" [1,2] \n"), "json", "[\n  1,\n  2\n]")
	check([]byte(`{"id":1`), "text", `{"id":1`) // not valid JSON: shown as it is
	check([]byte("42"), "text", "42")           // a JSON scalar reads fine as text
	check([]byte("grüße\tand\nlines"), "text", "grüße\tand\nlines")
	check([]byte("bell\x07"), "hex", "00000000  62 65 6c 6c 07                                    |bell.|\n")
	check([]byte{0xff, 0xfe}, "hex", "00000000  ff fe                                             |..|\n")
}

func TestHexDumpLines(t *testing.T) {
	raw := make([]byte, 20)
	for i := range raw {
		raw[i] = byte(0x41 + i)
	}
	raw[3] = 0
	want := "00000000  41 42 43 00 45 46 47 48  49 4a 4b 4c 4d 4e 4f 50  |ABC.EFGHIJKLMNOP|\n" +
		"00000010  51 52 53 54                                       |QRST|\n"
	if got := hexDump(raw); got != want {
		t.Errorf("hexDump:\n%s\nwant:\n%s", got, want)
	}
}

func TestRenderValueTruncates(t *testing.T) {
	big := []byte(strings.Repeat("é", maxRenderedBytes)) // 2 bytes a rune: cut inside one
	got := renderValue(big)
	if got.Kind != "text" || !got.Truncated || got.Size != len(big) || len(got.Text) != maxRenderedBytes {
		t.Errorf("big text: kind %s truncated %v size %d shown %d", got.Kind, got.Truncated, got.Size, len(got.Text))
	}
	bigJSON := []byte(`{"k":"` + strings.Repeat("x", maxRenderedBytes) + `"}`)
	if got := renderValue(bigJSON); got.Kind != "text" || !got.Truncated {
		t.Errorf("big JSON: kind %s truncated %v, want text truncated (not pretty-printed in part)", got.Kind, got.Truncated)
	}
}

func TestRatesAndRing(t *testing.T) {
	ring := newSampleRing(3)
	start := time.Unix(1000, 0)
	for i, end := range []int64{0, 10, 30, 5, 25} { // 5: the topic was made again
		ring.add(sample{At: start.Add(time.Duration(i) * time.Second), TopicEnds: map[string]int64{"t": end}})
	}
	samples := ring.snapshot()
	if len(samples) != 3 || !samples[0].At.Equal(start.Add(2*time.Second)) {
		t.Fatalf("ring kept %d samples starting %v, want the last 3", len(samples), samples[0].At)
	}
	got := topicRate(samples, "t")
	if len(got) != 1 || got[0].Value != 20 {
		t.Errorf("rates %v, want one point of 20/s (the drop from 30 to 5 gives none)", got)
	}
}

func TestNumbers(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 7: "7", 2.5: "2.5", 1234: "1.23k", 1e6: "1M", 123456789: "123M"} {
		if got := shortNumber(v); got != want {
			t.Errorf("shortNumber(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]float64{0: 1, 3: 5, 11: 20, 99: 100, 501: 1000} {
		if got := niceCeiling(v); got != want {
			t.Errorf("niceCeiling(%v) = %v, want %v", v, got, want)
		}
	}
	if got := bytesText(1536); got != "1.5 KiB" {
		t.Errorf("bytesText(1536) = %q", got)
	}
}
