package io.gpupool.backend.host;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.ChunkSourceContract;

class HostChunkSourceContractTest extends ChunkSourceContract {
    @Override
    protected ChunkSource createSource() {
        return new HostChunkSource(256L << 20);
    }
}
