package io.gpupool.memory.source;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.ChunkSourceContract;

class LimitingChunkSourceContractTest extends ChunkSourceContract {
    @Override
    protected ChunkSource createSource() {
        return LimitingChunkSource.ofFraction(new SimulatedChunkSource("simulated", 1L << 30), 0.5);
    }
}
