package redis_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/sluice-cdc/sluice/pipeline"
	"github.com/sluice-cdc/sluice/sink/redis"
)

// The pipeline drives a sink like this: Recover once under its epoch,
// then Write batches, keeping the offset for its checkpoint.
func Example() {
	ctx := context.Background()
	s, err := redis.New(redis.Config{Addr: "127.0.0.1:6379", Mode: redis.ModeStream, KeyPrefix: "cdc:"}, "shop", slog.Default())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	rec, err := s.Recover(ctx, 1, "") // "": no checkpoint yet
	if err != nil {
		fmt.Println(err)
		return
	}
	batch := &pipeline.Batch{Epoch: 1, Messages: []pipeline.Message{{
		Seq: rec.MaxSeq + 1, Source: "shop", DB: "shop", Table: "items",
		Key: []byte(`{"id":1}`), Value: []byte(`{"after":{"id":1},"op":"c","sluice":{"seq":1,"epoch":1}}`),
	}}}
	offset, err := s.Write(ctx, batch) // XADD cdc:shop.items, atomically with the high-water mark
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("checkpoint offset", offset)
}

func ExampleConfig_Validate() {
	cfg := redis.Config{Addr: "127.0.0.1:6379", Key: "{db}.{tabel}"}
	fmt.Println(cfg.Validate())
	// Output: key "{db}.{tabel}": unknown placeholder {tabel}: use {db}, {table} or {source}
}
