package trace

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// benchInputs returns the bundled H200 traces (v1 gzip) and their decompressed text (v1 plain).
func benchInputs(b *testing.B) (gz, plain [][]byte) {
	b.Helper()
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "traces", "*.trace.gz"))
	if len(paths) == 0 {
		b.Skip("no bundled traces")
	}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			b.Fatal(err)
		}
		text, err := io.ReadAll(zr)
		if err != nil {
			b.Fatal(err)
		}
		gz, plain = append(gz, raw), append(plain, text)
	}
	return gz, plain
}

// benchRead reads every input through a Reader, b.N times, and reports events per second.
func benchRead(b *testing.B, inputs [][]byte) {
	b.Helper()
	var bytesIn int64
	for _, in := range inputs {
		bytesIn += int64(len(in))
	}
	b.SetBytes(bytesIn)
	b.ResetTimer()
	events := 0
	for i := 0; i < b.N; i++ {
		for _, in := range inputs {
			rd, err := NewReader(bytes.NewReader(in), "bench.trace")
			if err != nil {
				b.Fatal(err)
			}
			for {
				_, ok, err := rd.Next()
				if err != nil {
					b.Fatal(err)
				}
				if !ok {
					break
				}
				events++
			}
		}
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds()/1e6, "Mev/s")
}

// The Reader on the main job's hot path (`make run` reads the bundled v1 gzip traces).
func BenchmarkReadBundledGzip(b *testing.B) {
	gz, _ := benchInputs(b)
	benchRead(b, gz)
}

// The Reader over the same events as v1 plain text (no decompression: the parser alone).
func BenchmarkReadBundledPlain(b *testing.B) {
	_, plain := benchInputs(b)
	benchRead(b, plain)
}

// encodeBundledV2 re-encodes the bundled traces' events as v2 (blocks of DefaultFlushEvents, as the recorder
// writes them).
func encodeBundledV2(b *testing.B, compress bool) [][]byte {
	_, plain := benchInputs(b)
	var out [][]byte
	for _, text := range plain {
		tr, err := Read(bytes.NewReader(text), "bench.trace")
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		lw, err := NewLogWriter(&buf, compress, "pid=1")
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range tr.Events {
			lw.Add(e)
			if lw.Buffered() == DefaultFlushEvents {
				lw.Commit()
			}
		}
		lw.End("close")
		out = append(out, buf.Bytes())
	}
	return out
}

// The Reader over the bundled traces' events as the recorder writes them now (v2 gzip: a member per block).
func BenchmarkReadBundledV2Gzip(b *testing.B) { benchRead(b, encodeBundledV2(b, true)) }

// ... and as v2 plain text (the checksum of every block, no decompression).
func BenchmarkReadBundledV2Plain(b *testing.B) { benchRead(b, encodeBundledV2(b, false)) }
