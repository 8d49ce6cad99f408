package compaction

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/sluice-mq/sluice/batch"
)

// codecs decompresses and compresses batch bodies. A cleaner rewrites a compressed batch it removes
// records from with the batch's own codec, as Kafka does. Not safe for concurrent use.
type codecs struct {
	gzipWriter  *gzip.Writer
	zstdDecoder *zstd.Decoder
	zstdEncoder *zstd.Encoder
}

func newCodecs() (*codecs, error) { return &codecs{}, nil }

// zstd returns the zstd decoder and encoder, made on first use (they are costly to make, and a
// produce checking keys of uncompressed or gzip batches needs neither).
func (c *codecs) zstdCodecs() (*zstd.Decoder, *zstd.Encoder, error) {
	if c.zstdDecoder == nil {
		decoder, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			return nil, nil, fmt.Errorf("compaction: zstd decoder: %w", err)
		}
		encoder, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			decoder.Close()
			return nil, nil, fmt.Errorf("compaction: zstd encoder: %w", err)
		}
		c.zstdDecoder, c.zstdEncoder = decoder, encoder
	}
	return c.zstdDecoder, c.zstdEncoder, nil
}

func (c *codecs) close() {
	if c.zstdDecoder != nil {
		c.zstdDecoder.Close()
		c.zstdEncoder.Close()
	}
}

// xerialPrefix starts snappy data framed the way the Java client frames it.
var xerialPrefix = []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompress returns the records of a batch body compressed with codec.
func (c *codecs) decompress(codec int, body []byte) ([]byte, error) {
	switch codec {
	case batch.CodecNone:
		return body, nil
	case batch.CodecGzip:
		r, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("compaction: gzip: %w", err)
		}
		return readAll(r, "gzip")
	case batch.CodecSnappy:
		if len(body) > 16 && bytes.HasPrefix(body, xerialPrefix) {
			var out []byte
			for rest := body[16:]; len(rest) > 0; {
				if len(rest) < 4 || int(binary.BigEndian.Uint32(rest)) > len(rest)-4 {
					return nil, fmt.Errorf("compaction: snappy: truncated xerial block")
				}
				n := int(binary.BigEndian.Uint32(rest))
				block, err := s2.Decode(nil, rest[4:4+n])
				if err != nil {
					return nil, fmt.Errorf("compaction: snappy: %w", err)
				}
				out = append(out, block...)
				rest = rest[4+n:]
			}
			return out, nil
		}
		out, err := s2.Decode(nil, body)
		if err != nil {
			return nil, fmt.Errorf("compaction: snappy: %w", err)
		}
		return out, nil
	case batch.CodecLZ4:
		return readAll(lz4.NewReader(bytes.NewReader(body)), "lz4")
	case batch.CodecZstd:
		decoder, _, err := c.zstdCodecs()
		if err != nil {
			return nil, err
		}
		out, err := decoder.DecodeAll(body, nil)
		if err != nil {
			return nil, fmt.Errorf("compaction: zstd: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("compaction: unknown compression codec %d", codec)
}

func readAll(r io.Reader, name string) ([]byte, error) {
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("compaction: %s: %w", name, err)
	}
	return out, nil
}

// compress appends records compressed with codec to dst. xerial says whether snappy data is to be
// framed as the Java client frames it (as the batch being rewritten was).
func (c *codecs) compress(dst []byte, codec int, records []byte, xerial bool) ([]byte, error) {
	switch codec {
	case batch.CodecNone:
		return append(dst, records...), nil
	case batch.CodecGzip:
		buf := bytes.NewBuffer(dst)
		if c.gzipWriter == nil {
			c.gzipWriter = gzip.NewWriter(buf)
		}
		w := c.gzipWriter
		w.Reset(buf)
		if _, err := w.Write(records); err != nil {
			return nil, fmt.Errorf("compaction: gzip: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("compaction: gzip: %w", err)
		}
		return buf.Bytes(), nil
	case batch.CodecSnappy:
		block := s2.EncodeSnappy(nil, records)
		if !xerial {
			return append(dst, block...), nil
		}
		dst = append(dst, xerialPrefix...)
		dst = binary.BigEndian.AppendUint32(dst, 1) // version
		dst = binary.BigEndian.AppendUint32(dst, 1) // minimum compatible version
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(block)))
		return append(dst, block...), nil
	case batch.CodecLZ4:
		buf := bytes.NewBuffer(dst)
		w := lz4.NewWriter(buf)
		if _, err := w.Write(records); err != nil {
			return nil, fmt.Errorf("compaction: lz4: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("compaction: lz4: %w", err)
		}
		return buf.Bytes(), nil
	case batch.CodecZstd:
		_, encoder, err := c.zstdCodecs()
		if err != nil {
			return nil, err
		}
		return encoder.EncodeAll(records, dst), nil
	}
	return nil, fmt.Errorf("compaction: unknown compression codec %d", codec)
}
