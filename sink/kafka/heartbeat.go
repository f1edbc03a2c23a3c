package kafka

// Debezium's heartbeats (heartbeat.interval.ms), format debezium only.
//
// A heartbeat is a record in topic "<heartbeat.topics.prefix>.<source>"
// with key {"serverName":"<source>"} and value {"ts_ms":<now>} (schemas
// io.debezium.connector.common.ServerNameKey and
// io.debezium.connector.common.Heartbeat, version 1), written every
// interval whether or not the sources have changes, so that a consumer
// (and a cluster's monitoring) sees the connector alive while the
// database is idle.
//
// The sink writes them from a timer of its own, through its one
// transactional producer, each round in a transaction of its own: the
// producer is the sink's only one (a second with the transactional id
// would fence it), and a transactional producer writes only inside a
// transaction. mu serialises the timer with Recover, Write and Close, so
// that a heartbeat transaction never overlaps a batch's and never uses a
// producer being replaced. A heartbeat carries no sluice headers: recovery,
// which counts records by their sluice-seq header, ignores it (and does
// not read the heartbeat topics at all). It is written only while the
// producer is ready (after a successful Recover, before a failed Write),
// so it is fenced exactly as the batches are: a heartbeat of a producer a
// newer one has fenced fails, the sink drops the producer, and the next
// Write reports pipeline.ErrFenced.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-cdc/sluice/codec"
)

const (
	heartbeatKeySchema   = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"serverName"}],"optional":false,"name":"io.debezium.connector.common.ServerNameKey","version":1}`
	heartbeatValueSchema = `{"type":"struct","fields":[{"type":"int64","optional":false,"field":"ts_ms"}],"optional":false,"name":"io.debezium.connector.common.Heartbeat","version":1}`
)

// heartbeatOn reports whether the sink writes heartbeats.
func (s *Sink) heartbeatOn() bool {
	return s.cfg.Format.IsDebezium() && s.cfg.HeartbeatIntervalMs > 0
}

// HeartbeatTopic is the topic of a source's heartbeats.
func (s *Sink) HeartbeatTopic(source string) string {
	return s.cfg.HeartbeatTopicsPrefix + "." + appendNameString(source)
}

func appendNameString(name string) string { return string(appendName(nil, name)) }

// startHeartbeat starts the timer (New calls it).
func (s *Sink) startHeartbeat() {
	s.hbStop, s.hbDone = make(chan struct{}), make(chan struct{})
	every := time.Duration(s.cfg.HeartbeatIntervalMs) * time.Millisecond
	go func() {
		defer close(s.hbDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.hbStop:
				return
			case <-t.C:
				s.heartbeat()
			}
		}
	}()
}

// stopHeartbeat stops the timer and waits for a round in progress.
func (s *Sink) stopHeartbeat() {
	if s.hbStop != nil {
		close(s.hbStop)
		<-s.hbDone
		s.hbStop = nil
	}
}

// heartbeat writes one round of heartbeats, one per source, in one
// transaction; a failure drops the producer (as a failed Write does) and
// is reported by the next Write.
func (s *Sink) heartbeat() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ready || s.prod == nil {
		return // not recovered yet, or a Write failed: Recover comes first
	}
	sources := slices.Clone(s.cfg.Sources)
	for name := range s.sources {
		if !slices.Contains(sources, name) {
			sources = append(sources, name)
		}
	}
	if len(sources) == 0 {
		return
	}
	slices.Sort(sources)
	err := s.writeHeartbeats(sources, time.Now())
	if err != nil {
		s.closeProducer()
		s.hbErr = err
		s.log.Warn("writing a heartbeat failed; the sink's producer restarts at the next write", "err", err)
	}
}

func (s *Sink) writeHeartbeats(sources []string, now time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.RequestTimeout)
	defer cancel()
	var topics []string
	for _, src := range sources {
		if t := s.HeartbeatTopic(src); !s.known[t] {
			topics = append(topics, t)
		}
	}
	if len(topics) > 0 {
		if err := s.ensureTopics(ctx, topics); err != nil {
			return err
		}
	}
	ms := now.UnixMilli()
	recs := make([]*kgo.Record, 0, len(sources))
	for _, src := range sources {
		recs = append(recs, &kgo.Record{Topic: s.HeartbeatTopic(src), Key: s.heartbeatKey(src), Value: s.heartbeatValue(ms)})
	}
	if err := s.prod.BeginTransaction(); err != nil {
		return s.wrap("heartbeat: beginning the transaction", err)
	}
	if err := s.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return s.wrap("heartbeat: sending the records", err)
	}
	if err := s.prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return s.wrap("heartbeat: committing the transaction", err)
	}
	return nil
}

// heartbeatKey is Debezium's heartbeat key, {"serverName":<source>}.
func (s *Sink) heartbeatKey(source string) []byte {
	var b []byte
	if s.cfg.Format.Schemas {
		b = append(b, `{"schema":`+heartbeatKeySchema+`,"payload":`...)
	}
	b = append(b, `{"serverName":`...)
	b = codec.AppendString(b, source)
	b = append(b, '}')
	if s.cfg.Format.Schemas {
		b = append(b, '}')
	}
	return b
}

// heartbeatValue is Debezium's heartbeat value, {"ts_ms":<ms>}.
func (s *Sink) heartbeatValue(ms int64) []byte {
	var b []byte
	if s.cfg.Format.Schemas {
		b = append(b, `{"schema":`+heartbeatValueSchema+`,"payload":`...)
	}
	b = append(b, `{"ts_ms":`...)
	b = strconv.AppendInt(b, ms, 10)
	b = append(b, '}')
	if s.cfg.Format.Schemas {
		b = append(b, '}')
	}
	return b
}

// heartbeatFailure is what Write returns after a heartbeat failed (the
// producer is gone; Recover makes a new one).
func (s *Sink) heartbeatFailure() error {
	err := s.hbErr
	s.hbErr = nil
	if err == nil {
		return nil
	}
	return fmt.Errorf("kafka: sink %s: the producer was dropped after a heartbeat failed (Recover starts a new one): %w", s.cfg.Name, err)
}

// SetSources names the pipeline's sources, which get heartbeats from the
// start (Config.Sources).
func (s *Sink) SetSources(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Sources = slices.Clone(names)
}
