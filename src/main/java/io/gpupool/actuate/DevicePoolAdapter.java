package io.gpupool.actuate;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

import io.gpupool.memory.pool.DevicePool;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.metric.BlockLayoutMetric;
import io.gpupool.memory.metric.ChunkMetric;
import io.gpupool.memory.metric.PoolMetrics;
import org.jspecify.annotations.Nullable;

/**
 * {@link ManagedPool} over a {@link DevicePool}: reads go to its {@link PoolMetrics}, tune and trim
 * to the pool itself. The buddy map comes from {@link BlockLayoutMetric} when the pool's metrics offer
 * it; otherwise each chunk is reported with its free bytes only.
 */
public final class DevicePoolAdapter extends DeviceAdapter {

    private final DevicePool pool;

    /**
     * @param device        the selector, e.g. {@code cuda:0}
     * @param capacityBytes memory of the device (what a fractional cap applies to)
     * @param trace         trace recording of the allocator in front of the pool, or null
     */
    public DevicePoolAdapter(String device, DevicePool pool, long capacityBytes, @Nullable TraceControl trace) {
        super(device, capacityBytes, trace);
        this.pool = Objects.requireNonNull(pool, "pool");
    }

    @Override
    public PoolMetrics metrics() {
        return pool.metrics();
    }

    @Override
    public PoolConfig configuration() {
        return pool.config();
    }

    @Override
    public PoolConfig tune(PoolTuning tuning) {
        return pool.tune(tuning);
    }

    @Override
    public long trim() {
        return pool.trim();
    }

    @Override
    public List<ChunkLayout> layout() {
        return layout(pool.metrics());
    }

    static List<ChunkLayout> layout(PoolMetrics metrics) {
        List<ChunkLayout> chunks = new ArrayList<>();
        if (metrics instanceof BlockLayoutMetric blocks) {
            int index = 0;
            for (BlockLayoutMetric.ChunkBlocks chunk : blocks.layout()) {
                long free = 0;
                List<Block> leaves = new ArrayList<>(chunk.blocks().size());
                for (BlockLayoutMetric.Block b : chunk.blocks()) {
                    if (b.state() == BlockLayoutMetric.BlockState.FREE) {
                        free += b.bytes();
                    }
                    leaves.add(new Block(b.offset(), b.bytes(), b.state().name().toLowerCase(Locale.ROOT)));
                }
                chunks.add(new ChunkLayout(index++, chunk.bytes(), free, chunk.dedicated(), leaves));
            }
            return chunks;
        }
        int index = 0;
        for (ChunkMetric chunk : metrics.chunks()) {
            chunks.add(new ChunkLayout(index++, chunk.bytes(), chunk.freeBytes(), chunk.dedicated(), List.of()));
        }
        return chunks;
    }
}
