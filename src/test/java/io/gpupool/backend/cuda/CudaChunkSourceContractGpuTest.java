package io.gpupool.backend.cuda;

import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.ChunkSourceContract;
import org.junit.jupiter.api.Tag;

/** The ChunkSource contract for plain device memory (cuMemAlloc) on the first GPU. */
@Tag("gpu")
class CudaChunkSourceContractGpuTest extends ChunkSourceContract {

    private CudaBackend backend;

    @Override
    protected ChunkSource createSource() {
        backend = CudaTestSupport.backendOrSkip(CudaBackend.Options.defaults());
        return ((CudaDevice) backend.devices().getFirst()).plainChunkSource();
    }

    @Override
    protected void destroySource(ChunkSource source) {
        backend.close();
    }
}
