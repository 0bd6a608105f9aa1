package inspector

import (
	"bytes"
	"testing"
)

// BenchmarkPage builds and renders the README's run (4 steps).
func BenchmarkPage(b *testing.B) {
	run := demoRun(b)
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		v, err := Build(run, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := page.Execute(&buf, v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "page-bytes")
}
