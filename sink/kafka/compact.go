package kafka

import (
	"context"
	"slices"
	"strings"
)

// warnCompacted logs, once per topic, a warning for each topic the sink
// reads in recovery that the log cleaner compacts with
// min.compaction.lag.ms 0: compaction may then remove records written
// after the last checkpoint before a recovery reads them (an earlier
// change of a row, a tombstone after delete.retention.ms), and recovery
// would count them as not written (docs/SINKS-kafka.md, Compacted
// topics). It only warns: the records are usually still in the active
// segment, which is never compacted.
func (s *Sink) warnCompacted(ctx context.Context, topics []string) {
	var fresh []string
	for _, t := range topics {
		if !s.compactChecked[t] {
			fresh = append(fresh, t)
		}
	}
	if len(fresh) == 0 {
		return
	}
	slices.Sort(fresh)
	dctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	rcs, err := s.adm.DescribeTopicConfigs(dctx, fresh...)
	if err != nil {
		s.log.Debug("describing the configs of the topics to recover", "err", err)
		return
	}
	if s.compactChecked == nil {
		s.compactChecked = map[string]bool{}
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			continue
		}
		s.compactChecked[rc.Name] = true
		var policy, lag string
		for _, c := range rc.Configs {
			if c.Value == nil {
				continue
			}
			switch c.Key {
			case "cleanup.policy":
				policy = *c.Value
			case "min.compaction.lag.ms":
				lag = *c.Value
			}
		}
		if strings.Contains(policy, "compact") && lag == "0" {
			s.log.Warn("a topic the sink writes is compacted with min.compaction.lag.ms=0: compaction may remove records written after the last checkpoint before a recovery reads them, and the pipeline would write them again; set min.compaction.lag.ms above the longest outage to recover from exactly once (docs/SINKS-kafka.md, Compacted topics)",
				"topic", rc.Name, "cleanup.policy", policy, "fix", "kafka-configs.sh --bootstrap-server "+strings.Join(s.cfg.Brokers, ",")+" --alter --entity-type topics --entity-name "+rc.Name+" --add-config min.compaction.lag.ms=86400000")
		}
	}
}
