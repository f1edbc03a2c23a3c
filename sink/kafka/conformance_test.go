package kafka

import (
	"testing"

	"github.com/sluice-cdc/sluice/internal/sinktest"
	"github.com/sluice-cdc/sluice/pipeline"
)

// TestConformance runs the sink conformance suite on a real Kafka broker
// (Apache Kafka 4.4, shared by the package's tests). A write is one Kafka transaction, so a crash
// cuts at batch boundaries, and batches end anywhere inside a source
// transaction; recovery reads every partition of the sink's topics, in no
// order across partitions.
func TestConformance(t *testing.T) {
	c := newCluster(t)
	sinktest.Run(t, sinktest.Target{
		Open: func(t *testing.T, ns string) pipeline.Sink {
			return newSink(t, c, Config{Topic: "t" + ns + ".{db}.{table}", TransactionalID: "tx-" + ns})
		},
	})
}
