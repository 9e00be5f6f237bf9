package io.gpupool.serving;

import io.gpupool.backend.ComputeBackend;
import io.gpupool.backend.cuda.CudaBackend;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

import java.nio.file.Path;

/**
 * {@link ServingApplicationTest} again on the CUDA backend (CudaTensorOps, the pool over device
 * memory), with the example models from the test fixtures so that it runs from the GPU bundle too.
 */
@Tag("gpu")
@SpringBootTest(classes = ServingApplicationTest.Application.class,
        webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"gpupool.backend=cuda", "gpupool.serving.max-batch-size=16"})
class CudaServingApplicationGpuTest extends ServingApplicationTest {

    @BeforeAll
    static void requireCuda() {
        Assumptions.assumeTrue(CudaBackend.tryCreate().map(backend -> {
            ((ComputeBackend) backend).close();
            return true;
        }).orElse(false), "no CUDA driver or device");
    }

    @DynamicPropertySource
    static void models(DynamicPropertyRegistry registry) throws Exception {
        Path fixtures = Path.of(CudaServingApplicationGpuTest.class.getResource("/fixtures").toURI());
        registry.add("gpupool.models.path", fixtures::toString);
    }

    /** This class serves the fixtures, whose tiny-bert pins transformers' outputs only; the host test covers the shipped folder. */
    @Override
    @org.junit.jupiter.api.Disabled("serves src/test/resources/fixtures, not models/: ServingApplicationTest checks the shipped tiny-bert")
    void theShippedTinyBertOffersTheEmbeddingTheReadmeShows() {
    }
}
