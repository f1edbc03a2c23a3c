package join_test

import (
	"fmt"
	"os"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/join"
)

// A left join of orders with payments made within an hour after the order:
// order 1 is paid, order 2 is not and comes out alone once the watermark
// has passed its hour.
func ExampleOperator() {
	dir, _ := os.MkdirTemp("", "join-example")
	defer os.RemoveAll(dir)
	op, err := join.OpenOperator(dir, join.OperatorConfig{Type: join.LeftJoin, After: time.Hour, Fingerprint: "example"})
	if err != nil {
		panic(err)
	}
	defer op.Close()
	emit := func(o *join.Output) error {
		l, r := "null", "null"
		if o.Left != nil {
			l = string(o.Left.Data)
		}
		if o.Right != nil {
			r = string(o.Right.Data)
		}
		fmt.Println(l, "+", r)
		return nil
	}
	key := func(id int64) []byte {
		k, _ := join.AppendKeyValue(nil, nil, binlog.IntValue(id))
		return k
	}
	t0 := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	add := func(s join.Side, id int64, at time.Duration, data string) {
		if err := op.Add(s, &join.Row{Key: key(id), Time: t0.Add(at).UnixMicro(), ID: []byte(data), Data: []byte(data)}, emit); err != nil {
			panic(err)
		}
	}
	add(join.Left, 1, 0, "order 1")
	add(join.Left, 2, time.Minute, "order 2")
	add(join.Right, 1, 10*time.Minute, "payment for 1")
	if _, err := op.Advance(t0.Add(2*time.Hour).UnixMicro(), emit); err != nil {
		panic(err)
	}
	if err := op.Commit(true); err != nil {
		panic(err)
	}
	// Output:
	// order 1 + payment for 1
	// order 2 + null
}
