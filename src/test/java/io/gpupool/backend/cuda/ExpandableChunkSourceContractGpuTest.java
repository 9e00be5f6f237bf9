package io.gpupool.backend.cuda;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.ChunkSourceContract;
import org.junit.jupiter.api.Tag;

/** The ChunkSource contract for the expandable-segments source (cuMemCreate/cuMemMap) on the first GPU. */
@Tag("gpu")
class ExpandableChunkSourceContractGpuTest extends ChunkSourceContract {

    private CudaBackend backend;

    @Override
    protected ChunkSource createSource() {
        backend = CudaTestSupport.backendOrSkip(CudaBackend.Options.defaults());
        return ((CudaDevice) backend.devices().getFirst()).expandableChunkSource();
    }

    @Override
    protected void destroySource(ChunkSource source) {
        backend.close();
    }
}
