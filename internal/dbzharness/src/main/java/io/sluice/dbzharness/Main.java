package io.sluice.dbzharness;

import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import io.debezium.embedded.Connect;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Runs Debezium Embedded (with Kafka Connect's JsonConverter) for
 * internal/dbzharness: one JVM serves many captures. It reads commands
 * from standard input, one a line:
 *
 * <pre>capture PROPERTIES OUTPUT MAX_RECORDS IDLE_MS</pre>
 *
 * PROPERTIES is a Java properties file of Debezium's engine and connector
 * options; OUTPUT gets one line per record: its topic, then its key and
 * value as JsonConverter serialises them with schemas.enable=false, then
 * the same with schemas.enable=true, separated by tabs ("null" for a null
 * key or value). Both converters are configured with the properties under
 * "converter." (as Kafka Connect's key.converter.* and value.converter.*),
 * schemas.enable apart. The capture ends after MAX_RECORDS records, or
 * IDLE_MS milliseconds without a record after the first one (two minutes
 * before it), or when the engine stops by itself. It answers
 * on standard output "ok RECORDS MILLIS" or "error MESSAGE"; Debezium's
 * own log goes to standard error.
 *
 * <pre>consume BROKERS OUTPUT TOPIC[,TOPIC...] TIMEOUT_MS</pre>
 *
 * reads every partition of the topics from its start to its end with
 * Kafka's own Java consumer (isolation.level=read_committed: the end is
 * each partition's last stable offset when the command starts) and writes
 * one line per record: topic, partition, offset, key, value and headers,
 * separated by tabs, key and value in base64 ("-" for a null one), the
 * headers as base64(name):base64(value) pairs separated by commas (a null
 * value "-"; "-" for no headers). It answers "ok RECORDS MILLIS" or "error MESSAGE", the
 * latter when a topic does not exist or the end is not reached within
 * TIMEOUT_MS.
 *
 * End of input ends the JVM.
 */
public final class Main {
    private static final Object EOF = new Object();

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
        // Debezium and Kafka log to System.out in places: keep the protocol clean.
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        out.println("ready");
        for (String line; (line = in.readLine()) != null; ) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split(" ");
            if (f.length != 5 || !(f[0].equals("capture") || f[0].equals("consume"))) {
                out.println("error want: capture PROPERTIES OUTPUT MAX_RECORDS IDLE_MS, or consume BROKERS OUTPUT TOPICS TIMEOUT_MS, got: " + line);
                continue;
            }
            long t0 = System.nanoTime();
            try {
                int n = f[0].equals("capture")
                        ? capture(Path.of(f[1]), Path.of(f[2]), Integer.parseInt(f[3]), Long.parseLong(f[4]))
                        : consume(f[1], Path.of(f[2]), f[3].split(","), Long.parseLong(f[4]));
                out.println("ok " + n + " " + (System.nanoTime() - t0) / 1_000_000);
            } catch (Throwable e) {
                String msg = String.valueOf(e);
                for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
                    msg += ": " + c;
                }
                out.println("error " + msg.replace('\n', ' '));
            }
        }
    }

    private static String b64(byte[] b) {
        return b == null ? "-" : Base64.getEncoder().encodeToString(b);
    }

    private static int consume(String brokers, Path output, String[] topics, long timeoutMs) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", brokers);
        p.put("isolation.level", "read_committed");
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        int n = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p);
             BufferedWriter w = Files.newBufferedWriter(output, StandardCharsets.UTF_8)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (String t : topics) {
                List<PartitionInfo> ps = c.partitionsFor(t, Duration.ofMillis(timeoutMs));
                if (ps == null || ps.isEmpty()) {
                    throw new Exception("topic " + t + " does not exist");
                }
                for (PartitionInfo pi : ps) {
                    tps.add(new TopicPartition(t, pi.partition()));
                }
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofMillis(timeoutMs));
            for (;;) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp, Duration.ofMillis(timeoutMs)) < end.get(tp)) {
                        done = false;
                        break;
                    }
                }
                if (done) {
                    return n;
                }
                if (System.nanoTime() > deadline) {
                    throw new Exception("read " + n + " records in " + timeoutMs + " ms without reaching the end offsets " + end);
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    StringBuilder b = new StringBuilder();
                    b.append(r.topic()).append('\t').append(r.partition()).append('\t').append(r.offset())
                            .append('\t').append(b64(r.key())).append('\t').append(b64(r.value())).append('\t');
                    int h = 0;
                    for (Header hd : r.headers()) {
                        if (h++ > 0) {
                            b.append(',');
                        }
                        b.append(b64(hd.key().getBytes(StandardCharsets.UTF_8))).append(':').append(b64(hd.value()));
                    }
                    if (h == 0) {
                        b.append('-');
                    }
                    b.append('\n');
                    w.write(b.toString());
                    n++;
                }
            }
        }
    }

    private static JsonConverter converter(Map<String, String> conf, boolean schemas, boolean isKey) {
        Map<String, String> c = new HashMap<>(conf);
        c.put("schemas.enable", String.valueOf(schemas));
        JsonConverter j = new JsonConverter();
        j.configure(c, isKey);
        return j;
    }

    private static String text(byte[] b) {
        return b == null ? "null" : new String(b, StandardCharsets.UTF_8);
    }

    private static int capture(Path props, Path output, int max, long idleMs) throws Exception {
        Properties p = new Properties();
        try (FileInputStream s = new FileInputStream(props.toFile())) {
            p.load(s);
        }
        Map<String, String> conv = new HashMap<>();
        for (String k : p.stringPropertyNames()) {
            if (k.startsWith("converter.")) {
                conv.put(k.substring("converter.".length()), p.getProperty(k));
            }
        }
        JsonConverter[] keyConv = {converter(conv, false, true), converter(conv, true, true)};
        JsonConverter[] valueConv = {converter(conv, false, false), converter(conv, true, false)};
        LinkedBlockingQueue<Object> q = new LinkedBlockingQueue<>();
        final Throwable[] failure = new Throwable[1];
        DebeziumEngine<RecordChangeEvent<SourceRecord>> engine = DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
                .using(p)
                .notifying(r -> q.add(r))
                .using((success, message, error) -> {
                    if (!success) {
                        failure[0] = error != null ? error : new RuntimeException(message);
                    }
                    q.add(EOF);
                })
                .build();
        ExecutorService ex = Executors.newSingleThreadExecutor();
        ex.execute(engine);
        int n = 0;
        try (BufferedWriter w = Files.newBufferedWriter(output, StandardCharsets.UTF_8)) {
            while (n < max) {
                Object o = q.poll(n == 0 ? Math.max(idleMs, 120_000) : idleMs, TimeUnit.MILLISECONDS);
                if (o == null || o == EOF) {
                    break;
                }
                @SuppressWarnings("unchecked")
                SourceRecord r = ((RecordChangeEvent<SourceRecord>) o).record();
                w.write(r.topic());
                for (int i = 0; i < 2; i++) {
                    w.write('\t');
                    w.write(text(keyConv[i].fromConnectData(r.topic(), r.keySchema(), r.key())));
                    w.write('\t');
                    w.write(text(valueConv[i].fromConnectData(r.topic(), r.valueSchema(), r.value())));
                }
                w.write('\n');
                n++;
            }
        } finally {
            try {
                engine.close();
            } catch (IllegalStateException alreadyStopped) {
                // It stopped by itself (the snapshot is done, or it failed).
            }
            ex.shutdown();
            ex.awaitTermination(60, TimeUnit.SECONDS);
        }
        if (failure[0] != null && n < max) {
            throw new Exception("engine stopped after " + n + " records", failure[0]);
        }
        return n;
    }
}
