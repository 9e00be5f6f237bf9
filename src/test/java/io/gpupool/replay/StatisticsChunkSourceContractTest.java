package io.gpupool.replay;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.ChunkSourceContract;

class StatisticsChunkSourceContractTest extends ChunkSourceContract {
    @Override
    protected ChunkSource createSource() {
        return new StatisticsChunkSource(new SimulatedChunkSource("simulated", 1L << 30));
    }
}
