// Package backoff is the one wait between attempts that sluice uses
// wherever it tries again (a sink that is down, a lost binlog connection,
// a failed campaign, a held lock): a delay that starts at a minimum and
// doubles after each attempt up to a maximum, slept in a way that ends
// early when the caller's context does.
//
//	b := backoff.New(100*time.Millisecond, 10*time.Second)
//	for {
//		err := try()
//		if err == nil {
//			break
//		}
//		d := b.Next()
//		log.Warn("failed; trying again", "in", d, "err", err)
//		if err := backoff.Sleep(ctx, d); err != nil {
//			return err
//		}
//	}
package backoff

import (
	"context"
	"time"
)

// Backoff is a doubling delay: Next returns min, then twice the delay it
// returned before, never more than max (min itself is returned as it is,
// even above max). The zero value always returns 0.
type Backoff struct {
	min, max, next time.Duration
}

// New returns a Backoff whose first delay is min and whose delays double
// up to max.
func New(min, max time.Duration) Backoff {
	return Backoff{min: min, max: max, next: min}
}

// Next returns the delay to wait before the next attempt and doubles the
// one after it, up to max.
func (b *Backoff) Next() time.Duration {
	d := b.next
	if d > b.max-d {
		b.next = b.max // 2d > max, written so that 2d cannot overflow
	} else {
		b.next = 2 * d
	}
	return d
}

// Reset makes the next delay min again (after an attempt that got on).
func (b *Backoff) Reset() { b.next = b.min }

// Sleep waits for d, or until ctx ends: then it returns ctx's error at
// once.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
