package io.gpupool.memory.source;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.ChunkSourceContract;
import io.gpupool.memory.trace.TraceRecorder;

class TracingChunkSourceContractTest extends ChunkSourceContract {
    @Override
    protected ChunkSource createSource() {
        TraceRecorder recorder = new TraceRecorder(1 << 16);
        recorder.start();
        return new TracingChunkSource(new SimulatedChunkSource("simulated", 1L << 30), recorder);
    }
}
