package main

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/sluice-cdc/sluice/config"
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
		c.Format = sc.Format.Codec()
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
		c.Format = sc.Format.Codec()
		s, err := redissink.New(c, pipelineName, slog.Default())
		if err != nil {
			return nil, wrap(err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("%s:%d: sinks[%d]: sink type %q is not available in this build", path, sc.Line, i, sc.Type)
}

// checkKafkaTopics refuses two Kafka sinks that share a seed broker and
// write to the same topic template: each one's recovery would count the
// other's records (of the same pipeline) as its own.
func checkKafkaTopics(sinks []pipeline.Sink) error {
	var ks []*kafkasink.Sink
	for _, s := range sinks {
		if k, ok := s.(*kafkasink.Sink); ok {
			ks = append(ks, k)
		}
	}
	for i, a := range ks {
		for _, b := range ks[i+1:] {
			if !slices.ContainsFunc(a.Brokers(), func(br string) bool { return slices.Contains(b.Brokers(), br) }) {
				continue // other clusters, as far as the config tells
			}
			ta, tb := a.TopicTemplates(), b.TopicTemplates()
			for _, oa := range slices.Sorted(maps.Keys(ta)) {
				for _, ob := range slices.Sorted(maps.Keys(tb)) {
					if ta[oa] == tb[ob] {
						return fmt.Errorf("sinks %s and %s write to the same Kafka cluster and topics (%s %q of %s, %s %q of %s): each sink's recovery would count the other's records as its own; give one of them its own %s", a.Name(), b.Name(), oa, ta[oa], a.Name(), ob, tb[ob], b.Name(), ob)
					}
				}
			}
		}
	}
	return nil
}
