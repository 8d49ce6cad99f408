package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// renderedValue is a key, value or header value as the message browser shows it.
type renderedValue struct {
	Kind      string // "null", "empty", "json", "text" or "hex"
	Text      string
	Size      int
	Truncated bool // Text shows only the first maxRenderedBytes bytes
}

// maxRenderedBytes bounds what one value puts into a page.
const maxRenderedBytes = 16 << 10

// renderValue picks how to show raw: nil as null, a JSON object or array pretty-printed,
// printable UTF-8 as text, anything else as a hex dump (offset, 16 bytes in hex, the bytes as
// ASCII with '.' for the unprintable).
func renderValue(raw []byte) renderedValue {
	switch {
	case raw == nil:
		return renderedValue{Kind: "null", Text: "null"}
	case len(raw) == 0:
		return renderedValue{Kind: "empty", Text: "(empty)"}
	}
	rendered := renderedValue{Size: len(raw)}
	shown := raw
	if len(shown) > maxRenderedBytes {
		shown, rendered.Truncated = shown[:maxRenderedBytes], true
	}
	trimmed := bytes.TrimSpace(raw)
	if !rendered.Truncated && len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') && json.Valid(trimmed) {
		var out bytes.Buffer
		if json.Indent(&out, trimmed, "", "  ") == nil {
			rendered.Kind, rendered.Text = "json", out.String()
			return rendered
		}
	}
	if printable(shown, rendered.Truncated) {
		rendered.Kind, rendered.Text = "text", string(shown)
		return rendered
	}
	rendered.Kind, rendered.Text = "hex", hexDump(shown)
	return rendered
}

// printable reports whether b is UTF-8 text without control characters other than tab and line
// breaks. A truncated value may end inside a rune.
func printable(b []byte, truncated bool) bool {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			return truncated && len(b) < utf8.UTFMax && !utf8.FullRune(b)
		}
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
		b = b[size:]
	}
	return true
}

// hexDump writes b as lines of "offset  hex bytes  |ascii|", 16 bytes a line.
func hexDump(b []byte) string {
	var out strings.Builder
	for line := 0; line < len(b); line += 16 {
		chunk := b[line:min(line+16, len(b))]
		fmt.Fprintf(&out, "%08x ", line)
		for i := 0; i < 16; i++ {
			if i == 8 {
				out.WriteByte(' ')
			}
			if i < len(chunk) {
				fmt.Fprintf(&out, " %02x", chunk[i])
			} else {
				out.WriteString("   ")
			}
		}
		out.WriteString("  |")
		for _, c := range chunk {
			if c >= 0x20 && c < 0x7f {
				out.WriteByte(c)
			} else {
				out.WriteByte('.')
			}
		}
		out.WriteString("|\n")
	}
	return out.String()
}
