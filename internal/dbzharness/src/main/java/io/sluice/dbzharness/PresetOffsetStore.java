package io.sluice.dbzharness;

import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.storage.MemoryOffsetBackingStore;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;

/**
 * An in-memory offset store that starts with one offset, so that the
 * engine resumes where a benchmark's binlog range starts: the engine's
 * properties "offset.storage.preset.key" and "offset.storage.preset.value"
 * are the key and value as the engine's offset converter (JsonConverter,
 * schemas.enable=false) writes them, e.g.
 * ["ENGINE_NAME",{"server":"TOPIC_PREFIX"}] and
 * {"file":"binlog.000001","pos":1234}.
 */
public final class PresetOffsetStore extends MemoryOffsetBackingStore {
    @Override
    public void configure(WorkerConfig config) {
        super.configure(config);
        Map<String, String> o = config.originalsStrings();
        String k = o.get("offset.storage.preset.key");
        String v = o.get("offset.storage.preset.value");
        if (k != null && v != null) {
            data.put(ByteBuffer.wrap(k.getBytes(StandardCharsets.UTF_8)), ByteBuffer.wrap(v.getBytes(StandardCharsets.UTF_8)));
        }
    }

    @Override
    public Set<Map<String, Object>> connectorPartitions(String connectorName) {
        return Set.of();
    }
}
