package snapshot

import (
	"context"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

// withContext runs fn, which talks to the server over c, so that ctx
// can cut it short: go-mysql has no contexts, so when ctx is done the
// connection's deadline is set in the past, which fails the read or write
// under way and leaves the connection unusable.
func withContext(ctx context.Context, c *client.Conn, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	err := fn()
	if !stop() {
		// ctx ended while fn ran: whatever fn returned, the connection has
		// been broken on purpose.
		if err == nil {
			err = ctx.Err()
		} else {
			err = fmt.Errorf("%w (%v); the connection is unusable and must be closed", ctx.Err(), err)
		}
	}
	return err
}
