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

func TestFits(t *testing.T) {
	for _, c := range []struct {
		used, n, limit int
		want           bool
	}{
		{0, 10, 100, true},
		{90, 10, 100, true},  // the limit may be filled exactly
		{91, 10, 100, false}, // one byte over
		{0, 250, 100, true},  // larger than the limit: alone
		{1, 250, 100, false}, // ... only alone
		{100, 0, 100, true},  // nothing more
		{150, 1, 100, false}, // over already (a large item in flight)
	} {
		if got := Fits(c.used, c.n, c.limit); got != c.want {
			t.Errorf("Fits(%d, %d, %d) = %t, want %t", c.used, c.n, c.limit, got, c.want)
		}
	}
}

var errStopped = errors.New("consumer stopped")

func TestCloseWakesWaitersWithItsError(t *testing.T) {
	ctx := context.Background()
	b := New(10)
	if err := b.Acquire(ctx, 10); err != nil {
		t.Fatal(err)
	}
	a, c := acquired(ctx, b, 5), acquired(ctx, b, 5)
	mustWait(t, a, "first waiter")
	mustWait(t, c, "second waiter")
	b.Close(errStopped)
	for _, ch := range []<-chan error{a, c} {
		select {
		case err := <-ch:
			if !errors.Is(err, errStopped) {
				t.Fatalf("waiter woken by Close: %v, want %v", err, errStopped)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter still waits after Close")
		}
	}
	if b.Used() != 10 {
		t.Fatalf("used %d after Close, want 10 (the woken waiters took nothing)", b.Used())
	}
}

func TestAcquireAfterCloseFails(t *testing.T) {
	ctx := context.Background()
	b := New(100)
	if err := b.Acquire(ctx, 30); err != nil {
		t.Fatal(err)
	}
	b.Close(errStopped)
	b.Close(errors.New("a second close")) // keeps the first error
	if err := b.Acquire(ctx, 1); !errors.Is(err, errStopped) {
		t.Fatalf("acquire after Close, with room: %v, want %v", err, errStopped)
	}
	b.Release(30)
	if b.Used() != 0 {
		t.Fatalf("used %d after a release on a closed budget, want 0", b.Used())
	}
	if err := b.Acquire(ctx, 1); !errors.Is(err, errStopped) {
		t.Fatalf("acquire after Close, nothing in flight: %v, want %v", err, errStopped)
	}
}

func TestCloseBeforeCancelWins(t *testing.T) {
	b := New(10)
	if err := b.Acquire(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.Close(errStopped)
	if err := b.Acquire(ctx, 1); !errors.Is(err, errStopped) {
		t.Fatalf("acquire on a closed budget with a done context: %v, want %v", err, errStopped)
	}
}
