package io.gpupool.memory.source;

import io.gpupool.replay.SimulatedChunkSource;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.ChunkSourceContract;

/** With no trigger set, fault injection must be invisible. */
class FaultInjectingChunkSourceContractTest extends ChunkSourceContract {
    @Override
    protected ChunkSource createSource() {
        return new FaultInjectingChunkSource(new SimulatedChunkSource("simulated", 1L << 30));
    }
}
