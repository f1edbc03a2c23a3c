package main

import (
	"fmt"

	"github.com/sluice-cdc/sluice/config"
	"github.com/sluice-cdc/sluice/internal/bench"
	"github.com/sluice-cdc/sluice/pipeline"
)

// buildNetSink creates a Kafka, Redis or NATS sink.
func buildNetSink(path, pipelineName string, i int, sc config.Sink) (pipeline.Sink, error) {
	return nil, fmt.Errorf("%s:%d: sinks[%d]: sink type %q is not available in this build yet", path, sc.Line, i, sc.Type)
}

// netSinkKinds are the networked sinks of the pipeline benchmark.
func netSinkKinds() []bench.SinkKind { return nil }
