package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-cdc/sluice/binlog"
	"github.com/sluice-cdc/sluice/internal/testenv"
	"github.com/sluice-cdc/sluice/pipeline"
)

// benchBatch returns a batch of n messages with values of about 300 bytes,
// spread over 4 tables, a transaction end every 5 messages.
func benchBatch(first uint64, n int) []pipeline.Message {
	ms := make([]pipeline.Message, n)
	for i := range ms {
		seq := first + uint64(i)
		m := &ms[i]
		*m = pipeline.Message{
			Seq: seq, Source: "shop", DB: "shop", Table: "t" + strconv.Itoa(i%4), Op: binlog.OpInsert,
			Key: fmt.Appendf(nil, `{"id":%d}`, seq),
			Value: fmt.Appendf(nil, `{"before":null,"after":{"id":%d,"name":"customer %d","email":"c%d@example.com","balance":"1234.56","created":"2024-05-01T10:00:00Z"},`+
				`"source":{"name":"shop","db":"shop","table":"t%d","file":"mysql-bin.000001","pos":%d},"op":"c","ts_ms":1714557600000,"sluice":{"seq":%d,"epoch":1}}`,
				seq, seq, seq, i%4, 1000+seq*300, seq),
		}
		if i%5 == 4 {
			m.End = endAt(uint32(seq))
		}
	}
	return ms
}

// BenchmarkWrite writes batches of 1000 messages of about 300 bytes to a
// local redis-server with appendfsync always: to four streams (also
// trimmed with max_len), and as rows of one table (materialize mode).
// Each case has its own server.
func BenchmarkWrite(b *testing.B) {
	for _, per := range []int{500, 1000} {
		b.Run("stream/per_script="+strconv.Itoa(per), func(b *testing.B) {
			benchWrite(b, Config{MessagesPerScript: per}, benchBatch(1, 1000))
		})
	}
	b.Run("stream/max_len=10000", func(b *testing.B) {
		benchWrite(b, Config{MaxLen: 10000}, benchBatch(1, 1000))
	})
	b.Run("materialize/per_script=1000", func(b *testing.B) {
		benchWrite(b, Config{Mode: ModeMaterialize}, benchRows(1000))
	})
}

var benchTable = &binlog.Table{
	Schema: "shop", Name: "customers",
	Columns: []binlog.Column{
		{Name: "id", Kind: binlog.KindInt},
		{Name: "name", Kind: binlog.KindString, Charset: "utf8mb4"},
		{Name: "email", Kind: binlog.KindString, Charset: "utf8mb4"},
		{Name: "balance", Kind: binlog.KindDecimal},
		{Name: "created", Kind: binlog.KindTimestamp},
	},
	PrimaryKey: []int{0},
}

// benchRows returns inserts of n rows; every batch writes the same rows
// again, so each message replaces a hash (DEL + HSET).
func benchRows(n int) []pipeline.Message {
	ms := benchBatch(1, n)
	for i := range ms {
		ms[i].DB, ms[i].Table = "shop", "customers"
		id := int64(i)
		ms[i].Key = fmt.Appendf(nil, `{"id":%d}`, id)
		ms[i].Change = &binlog.Change{Op: binlog.OpInsert, Table: benchTable, After: binlog.Row{
			binlog.IntValue(id),
			binlog.BytesValue(binlog.KindString, fmt.Appendf(nil, "customer %d", id)),
			binlog.BytesValue(binlog.KindString, fmt.Appendf(nil, "c%d@example.com", id)),
			binlog.BytesValue(binlog.KindDecimal, []byte("1234.56")),
			binlog.TimestampValue(1714557600, 0),
		}}
	}
	return ms
}

func benchWrite(b *testing.B, cfg Config, msgs []pipeline.Message) {
	ctx := context.Background()
	r := testenv.StartRedis(b)
	s := newSink(b, r.Addr(), cfg)
	if _, err := s.Recover(ctx, 1, ""); err != nil {
		b.Fatal(err)
	}
	batch := len(msgs)
	bytes := 0
	for _, m := range msgs {
		bytes += len(m.Value)
	}
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	next := uint64(1)
	for i := 0; i < b.N; i++ {
		for j := range msgs {
			msgs[j].Seq = next + uint64(j)
		}
		next += uint64(batch)
		if _, err := s.Write(ctx, &pipeline.Batch{Epoch: 1, Messages: msgs}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "msgs/s")
	b.StopTimer()
	c := newClient(b, r.Addr())
	info, _ := c.Info(ctx, "commandstats").Result()
	for _, l := range strings.Split(info, "\n") {
		if strings.HasPrefix(l, "cmdstat_exec:") {
			b.Logf("server side: %s", strings.TrimSpace(l))
		}
	}
}
