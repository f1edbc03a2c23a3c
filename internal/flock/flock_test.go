//go:build unix

package flock

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// Two Files on one path exclude each other; a waiter is told it waits,
// gets the lock as soon as it is released, and gives up when its context
// ends.
func TestFileExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	a, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if err := a.Lock(ctx, nil); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := b.Lock(short, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock while another File holds it: %v, want the context's error", err)
	}
	var told atomic.Int32
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx, func(time.Duration) { told.Add(1) }) }()
	time.Sleep(1200 * time.Millisecond)
	if told.Load() == 0 {
		t.Error("the waiter was not told it waits")
	}
	released := time.Now()
	if err := a.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(released); d > 200*time.Millisecond {
		t.Errorf("the waiter took the lock %v after it was released", d)
	}
	// Closing the holder releases the lock, as a process's death does.
	b.Close()
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	short2, cancel2 := context.WithTimeout(ctx, time.Second)
	defer cancel2()
	if err := c.Lock(short2, nil); err != nil {
		t.Fatalf("Lock after the holder closed its file: %v", err)
	}
}
