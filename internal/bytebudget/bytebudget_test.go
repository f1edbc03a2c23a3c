package bytebudget

import (
	"context"
	"errors"
	"testing"
	"time"
)

// acquired runs Acquire in a goroutine and returns its result channel.
func acquired(ctx context.Context, b *Budget, n int) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- b.Acquire(ctx, n) }()
	return ch
}

func mustWait(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned (%v), want it to wait", what, err)
	case <-time.After(50 * time.Millisecond):
	}
}

func mustPass(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still waits", what)
	}
}

func TestAcquireWithinLimit(t *testing.T) {
	ctx := context.Background()
	b := New(100)
	for _, n := range []int{40, 60} {
		if err := b.Acquire(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if b.Used() != 100 {
		t.Fatalf("used %d, want 100 (the limit may be filled exactly)", b.Used())
	}
	ch := acquired(ctx, b, 1)
	mustWait(t, ch, "acquiring past the limit")
	b.Release(40)
	mustPass(t, ch, "acquiring after a release")
	if b.Used() != 61 {
		t.Fatalf("used %d, want 61", b.Used())
	}
}

func TestLargerThanTheLimitPassesAlone(t *testing.T) {
	ctx := context.Background()
	b := New(100)
	mustPass(t, acquired(ctx, b, 250), "an item larger than the limit, nothing in flight")
	ch := acquired(ctx, b, 1)
	mustWait(t, ch, "acquiring behind a large item")
	b.Release(250)
	mustPass(t, ch, "acquiring once the large item is released")

	big := acquired(ctx, b, 250)
	mustWait(t, big, "a large item while a byte is in flight")
	b.Release(1)
	mustPass(t, big, "a large item once nothing is in flight")
}

func TestReleaseWakesEveryWaiter(t *testing.T) {
	ctx := context.Background()
	b := New(10)
	if err := b.Acquire(ctx, 10); err != nil {
		t.Fatal(err)
	}
	a, c := acquired(ctx, b, 5), acquired(ctx, b, 5)
	mustWait(t, a, "first waiter")
	mustWait(t, c, "second waiter")
	b.Release(10)
	mustPass(t, a, "first waiter after the release")
	mustPass(t, c, "second waiter after the release")
}

func TestAcquireEndsWithContext(t *testing.T) {
	b := New(10)
	if err := b.Acquire(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := acquired(ctx, b, 1)
	mustWait(t, ch, "acquiring past the limit")
	cancel()
	select {
	case err := <-ch:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled acquire: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled acquire still waits")
	}
	if b.Used() != 10 {
		t.Fatalf("used %d after a cancelled acquire, want 10", b.Used())
	}
}
