package backoff

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name     string
		min, max time.Duration
		want     []time.Duration
	}{
		{"doubles up to max", 100 * ms, 1000 * ms, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1000 * ms, 1000 * ms}},
		{"max not a power of two of min", 3 * ms, 10 * ms, []time.Duration{3 * ms, 6 * ms, 10 * ms, 10 * ms}},
		{"twice the delay is exactly max", 5 * ms, 10 * ms, []time.Duration{5 * ms, 10 * ms, 10 * ms}},
		{"min above max comes first, then max", 30 * ms, 20 * ms, []time.Duration{30 * ms, 20 * ms, 20 * ms}},
		{"zero min stays zero", 0, time.Second, []time.Duration{0, 0, 0}},
		{"huge max does not overflow", time.Duration(1) << 61, time.Duration(1<<63 - 1), []time.Duration{1 << 61, 1 << 62, 1<<63 - 1, 1<<63 - 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(tc.min, tc.max)
			var got []time.Duration
			for range tc.want {
				got = append(got, b.Next())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("delays %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReset(t *testing.T) {
	b := New(time.Second, time.Minute)
	b.Next()
	b.Next()
	b.Reset()
	if d := b.Next(); d != time.Second {
		t.Fatalf("after Reset: %v, want 1s", d)
	}
	var zero Backoff
	if d := zero.Next(); d != 0 {
		t.Fatalf("zero Backoff: %v, want 0", d)
	}
}

func TestSleep(t *testing.T) {
	start := time.Now()
	if err := Sleep(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("slept %v, want at least 20ms", took)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start = time.Now()
	if err := Sleep(ctx, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled sleep: %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("cancelled sleep took %v", took)
	}
}
