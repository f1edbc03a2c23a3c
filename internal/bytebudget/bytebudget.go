// Package bytebudget bounds memory by bytes between a producer and a
// consumer: the producer acquires an item's size before it queues the
// item and waits while that would take the bytes in flight over the
// limit; the consumer releases the size once it is done with the item. A
// slow consumer so holds the producer back (backpressure) without a queue
// that grows without bound, whatever the sizes of the items.
//
// An item larger than the whole limit still passes, alone: it waits until
// nothing is in flight. Fits is that rule, for a queue that counts its
// bytes itself (the pipeline's aligner, a pure state machine).
//
// A budget can be closed (Close) when its consumer stops: a producer
// waiting in Acquire, and every later Acquire, then gets the error the
// consumer gave.
package bytebudget

import (
	"context"
	"sync"
)

// Budget is a limit on the bytes in flight. Acquire and Release may be
// called from any goroutines.
type Budget struct {
	limit int

	mu   sync.Mutex
	used int
	// freed is made by a waiting Acquire and closed (and forgotten) by the
	// next Release or Close, which so wakes every waiter.
	freed chan struct{}
	// closed is Close's error (nil: open).
	closed error
}

// New returns a budget of limit bytes.
func New(limit int) *Budget { return &Budget{limit: limit} }

// Fits reports whether n more bytes may be taken while used are in
// flight under limit: they fit, or nothing is in flight (an item larger
// than the limit passes alone).
func Fits(used, n, limit int) bool { return used == 0 || used+n <= limit }

// Acquire takes n bytes of the budget, waiting while they do not fit
// (see Fits). It returns, having taken nothing, ctx's error if ctx ends
// while it waits, and Close's error if the budget is closed before or
// while it waits (that one first when both happen).
func (b *Budget) Acquire(ctx context.Context, n int) error {
	b.mu.Lock()
	for b.closed == nil && !Fits(b.used, n, b.limit) {
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			b.mu.Lock()
			err := b.closed
			b.mu.Unlock()
			if err != nil {
				return err
			}
			return ctx.Err()
		}
		b.mu.Lock()
	}
	if err := b.closed; err != nil {
		b.mu.Unlock()
		return err
	}
	b.used += n
	b.mu.Unlock()
	return nil
}

// Release gives back n bytes that Acquire took, and wakes the waiters.
func (b *Budget) Release(n int) {
	b.mu.Lock()
	b.used -= n
	b.wake()
	b.mu.Unlock()
}

// Close closes the budget with err (non-nil): the waiting Acquire calls
// return it, and so does every later one. Release and Used go on
// working. Closing a closed budget keeps the first error.
func (b *Budget) Close(err error) {
	b.mu.Lock()
	if b.closed == nil {
		b.closed = err
	}
	b.wake()
	b.mu.Unlock()
}

// wake wakes every waiting Acquire (b.mu held).
func (b *Budget) wake() {
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
}

// Used returns the bytes in flight.
func (b *Budget) Used() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
