package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sluice-cdc/sluice/codec"
	"github.com/sluice-cdc/sluice/config"
	"github.com/sluice-cdc/sluice/internal/bench"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/pipeline"
	kafkasink "github.com/sluice-cdc/sluice/sink/kafka"
	natssink "github.com/sluice-cdc/sluice/sink/nats"
	redissink "github.com/sluice-cdc/sluice/sink/redis"
)

// buildNetSink creates a Kafka, Redis or NATS sink from its block.
func buildNetSink(path, pipelineName string, i int, sc config.Sink) (pipeline.Sink, error) {
	where := fmt.Sprintf("sinks[%d].%s", i, sc.Type)
	wrap := func(err error) error { return fmt.Errorf("%s:%d: %s: %w", path, sc.Line, where, err) }
	switch sc.Type {
	case "kafka":
		var c kafkasink.Config
		if err := config.DecodeSink(path, &sc.Kafka, where, &c); err != nil {
			return nil, err
		}
		c.Name = sc.Name // the list entry's name is the sink's name
		c.Format = sc.Format.Codec()
		s, err := kafkasink.New(c, pipelineName, slog.Default())
		if err != nil {
			return nil, wrap(err)
		}
		return s, nil
	case "nats":
		var c natssink.Config
		if err := config.DecodeSink(path, &sc.NATS, where, &c); err != nil {
			return nil, err
		}
		c.Name = sc.Name // the list entry's name is the sink's name
		s, err := natssink.New(c, pipelineName, slog.Default())
		if err != nil {
			return nil, wrap(err)
		}
		return s, nil
	case "redis":
		var c redissink.Config
		if err := config.DecodeSink(path, &sc.Redis, where, &c); err != nil {
			return nil, err
		}
		c.Name = sc.Name // the list entry's name is the sink's name
		s, err := redissink.New(c, pipelineName, slog.Default())
		if err != nil {
			return nil, wrap(err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("%s:%d: sinks[%d]: sink type %q is not available in this build", path, sc.Line, i, sc.Type)
}

// netSinkKinds are the networked sinks of the pipeline benchmark.
func netSinkKinds() []bench.SinkKind {
	return []bench.SinkKind{{
		Name: "kafka", Formats: true,
		New: func(ctx context.Context, dir string, f codec.Format) (pipeline.Sink, func(), error) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				return nil, nil, err
			}
			s, err := kafkasink.New(kafkasink.Config{Name: "kafka", Brokers: c.ListenAddrs(), Format: f}, "bench", slog.Default())
			if err != nil {
				c.Close()
				return nil, nil, err
			}
			return s, func() { s.Close(); c.Close() }, nil
		},
	}, {
		Name: "redis",
		New: func(ctx context.Context, dir string, _ codec.Format) (pipeline.Sink, func(), error) {
			srv, err := testenv.StartRedisServer(ctx, dir)
			if err != nil {
				return nil, nil, err
			}
			s, err := redissink.New(redissink.Config{Name: "redis", Addr: srv.Addr(), Mode: "stream"}, "bench", slog.Default())
			if err != nil {
				srv.Close()
				return nil, nil, err
			}
			return s, func() { s.Close(); srv.Close() }, nil
		},
	}}
}
