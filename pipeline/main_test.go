package pipeline_test

import (
	"testing"

	"github.com/sluice-cdc/sluice/internal/testenv/kafkaenv"
)

// TestMain stops the package's shared Kafka broker after its tests.
func TestMain(m *testing.M) { kafkaenv.Main(m) }
