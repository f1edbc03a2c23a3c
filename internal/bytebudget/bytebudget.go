// Package bytebudget bounds memory by bytes between a producer and a
// consumer: the producer acquires an item's size before it queues the
// item and waits while that would take the bytes in flight over the
// limit; the consumer releases the size once it is done with the item. A
// slow consumer so holds the producer back (backpressure) without a queue
// that grows without bound, whatever the sizes of the items.
//
// An item larger than the whole limit still passes, alone: it waits until
// nothing is in flight.
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
	// next Release, which so wakes every waiter.
	freed chan struct{}
}

// New returns a budget of limit bytes.
func New(limit int) *Budget { return &Budget{limit: limit} }

// Acquire takes n bytes of the budget, waiting while bytes are in flight
// and n more would go over the limit. It returns ctx's error, having
// taken nothing, if ctx ends while it waits.
func (b *Budget) Acquire(ctx context.Context, n int) error {
	b.mu.Lock()
	for b.used > 0 && b.used+n > b.limit {
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
		b.mu.Lock()
	}
	b.used += n
	b.mu.Unlock()
	return nil
}

// Release gives back n bytes that Acquire took, and wakes the waiters.
func (b *Budget) Release(n int) {
	b.mu.Lock()
	b.used -= n
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	b.mu.Unlock()
}

// Used returns the bytes in flight.
func (b *Budget) Used() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
