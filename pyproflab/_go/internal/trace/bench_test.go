package trace

import (
	"bytes"
	"io"
	"testing"
)

func BenchmarkConvertSmall(b *testing.B) {
	data := recordN(b, 3)
	for _, tc := range []struct {
		name string
		only map[string]bool
	}{{"all", nil}, {"tables", fuzzOutputs}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := Convert(bytes.NewReader(data), io.Discard, 64, tc.only); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
