package bench

import (
	"math"
	"slices"
	"time"
)

// Latency summarises a set of timings, in milliseconds.
type Latency struct {
	Samples int     `json:"samples"`
	P50MS   float64 `json:"p50_ms"`
	P90MS   float64 `json:"p90_ms"`
	P99MS   float64 `json:"p99_ms"`
	MaxMS   float64 `json:"max_ms"`
	MeanMS  float64 `json:"mean_ms"`
}

// summarise computes a Latency from timings (nearest-rank percentiles).
func summarise(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Latency{
		Samples: len(s),
		P50MS:   ms(percentile(s, 50)),
		P90MS:   ms(percentile(s, 90)),
		P99MS:   ms(percentile(s, 99)),
		MaxMS:   ms(s[len(s)-1]),
		MeanMS:  ms(sum / time.Duration(len(s))),
	}
}

// percentile returns the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
