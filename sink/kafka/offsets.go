package kafka

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-cdc/sluice/codec"
)

// topicPartition names one partition.
type topicPartition struct {
	topic string
	part  int32
}

// offsets is the sink's offset: per partition, the offset after the last
// record the sink knows of (its next offset). Partitions missing from it
// are read from their start by recovery.
type offsets map[topicPartition]int64

// String is the checkpoint form: compact JSON, topics and partitions in
// order, e.g. {"shop.orders":{"0":123,"1":97}}. The empty map is "{}".
func (o offsets) String() string {
	if len(o) == 0 {
		return "{}"
	}
	tps := make([]topicPartition, 0, len(o))
	for tp := range o {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b topicPartition) int {
		if a.topic != b.topic {
			if a.topic < b.topic {
				return -1
			}
			return 1
		}
		return int(a.part) - int(b.part)
	})
	b := make([]byte, 0, 16+len(tps)*24)
	b = append(b, '{')
	for i, tp := range tps {
		if i == 0 || tps[i-1].topic != tp.topic {
			if i > 0 {
				b = append(b, "},"...)
			}
			b = codec.AppendString(b, tp.topic)
			b = append(b, ":{"...)
		} else {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(tp.part), 10)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, o[tp], 10)
	}
	return string(append(b, "}}"...))
}

// parseOffsets parses an offset written by offsets.String ("" is no
// offset: an empty map).
func parseOffsets(s string) (offsets, error) {
	o := offsets{}
	if s == "" {
		return o, nil
	}
	var raw map[string]map[string]int64
	if err := json.Unmarshal([]byte(s), &raw); err != nil || raw == nil {
		return nil, errors.New(`is not a Kafka sink offset like {"topic":{"0":123}}`)
	}
	for topic, parts := range raw {
		if topic == "" || len(topic) > MaxTopicLen || strings.IndexFunc(topic, func(r rune) bool { return !topicChar(r) }) >= 0 {
			return nil, fmt.Errorf("names topic %q, which cannot exist", topic)
		}
		for p, off := range parts {
			n, err := strconv.ParseInt(p, 10, 32)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("topic %q: partition %q is not a partition number", topic, p)
			}
			if off < 0 {
				return nil, fmt.Errorf("topic %q partition %d: offset %d is negative", topic, n, off)
			}
			o[topicPartition{topic, int32(n)}] = off
		}
	}
	return o, nil
}

// topics returns the topics named in o, each once.
func (o offsets) topics() []string {
	seen := map[string]bool{}
	var out []string
	for tp := range o {
		if !seen[tp.topic] {
			seen[tp.topic] = true
			out = append(out, tp.topic)
		}
	}
	return out
}
