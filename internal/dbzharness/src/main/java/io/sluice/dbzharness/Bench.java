package io.sluice.dbzharness;

import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import io.debezium.embedded.Connect;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;

import java.io.BufferedOutputStream;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * Debezium as sluice-bench's speed peer: one engine, in a JVM of its own,
 * reads until it has delivered MAX_RECORDS records, serialising each
 * value with JsonConverter (schemas.enable from SCHEMAS) to OUTPUT, as a
 * Debezium Server or Kafka Connect worker writing to a file would.
 *
 * <pre>java -cp CLASSPATH io.sluice.dbzharness.Bench PROPERTIES MAX_RECORDS SCHEMAS OUTPUT</pre>
 *
 * It prints one line on standard output: rows=N out_bytes=N seconds=F
 * (from the JVM's start to the last record) steady_seconds=F (from the
 * first record to the last) first_rows=1 startup_seconds=F (the JVM's
 * start to the first record).
 */
public final class Bench {
    public static void main(String[] args) throws Exception {
        long jvmStart = ManagementFactory.getRuntimeMXBean().getStartTime() * 1_000_000L;
        long nowWall = System.currentTimeMillis() * 1_000_000L;
        long nanoAtStart = System.nanoTime() - (nowWall - jvmStart);
        Properties p = new Properties();
        try (FileInputStream s = new FileInputStream(args[0])) {
            p.load(s);
        }
        int max = Integer.parseInt(args[1]);
        JsonConverter conv = new JsonConverter();
        conv.configure(Map.of("schemas.enable", args[2]), false);
        OutputStream out = new BufferedOutputStream(new FileOutputStream(args[3]), 1 << 16);
        CountDownLatch done = new CountDownLatch(1);
        long[] n = {0}, bytes = {0}, first = {0}, last = {0};
        Throwable[] failure = new Throwable[1];
        DebeziumEngine<RecordChangeEvent<SourceRecord>> engine = DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
                .using(p)
                .notifying(rec -> {
                    if (n[0] >= max) {
                        return;
                    }
                    SourceRecord r = rec.record();
                    byte[] b = conv.fromConnectData(r.topic(), r.valueSchema(), r.value());
                    try {
                        if (b != null) {
                            out.write(b);
                            bytes[0] += b.length + 1;
                        }
                        out.write('\n');
                    } catch (java.io.IOException e) {
                        throw new RuntimeException(e);
                    }
                    long t = System.nanoTime();
                    if (n[0]++ == 0) {
                        first[0] = t;
                    }
                    last[0] = t;
                    if (n[0] == max) {
                        done.countDown();
                    }
                })
                .using((success, message, error) -> {
                    if (!success) {
                        failure[0] = error != null ? error : new RuntimeException(message);
                    }
                    done.countDown();
                })
                .build();
        ExecutorService ex = Executors.newSingleThreadExecutor();
        ex.execute(engine);
        done.await();
        out.close();
        try {
            engine.close();
        } catch (IllegalStateException alreadyStopped) {
            // It stopped by itself (it failed: reported below).
        }
        ex.shutdown();
        ex.awaitTermination(60, TimeUnit.SECONDS);
        if (n[0] < max) {
            System.err.println("bench: the engine stopped after " + n[0] + " of " + max + " records: " + failure[0]);
            System.exit(1);
        }
        System.out.printf("rows=%d out_bytes=%d seconds=%.6f steady_seconds=%.6f first_rows=1 startup_seconds=%.6f%n",
                n[0], bytes[0], (last[0] - nanoAtStart) / 1e9, (last[0] - first[0]) / 1e9, (first[0] - nanoAtStart) / 1e9);
        System.exit(0);
    }
}
