package io.gpupool.actuate;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** {@code /actuator/gpupool} names each device's GEMM engine and activation type; the pool's numbers stay its own. */
class KernelsDescriptorTest {

    @Test
    void aPoolWithKernelsReportsThemAndDelegatesEverythingElse() {
        FakePool fake = new FakePool("cuda:0", true);
        ManagedPool pool = ManagedPool.withKernels(fake, new ManagedPool.Kernels("cuBLASLt 13.1.0", "bf16"));
        GpuPoolEndpoint.DeviceDescriptor descriptor = GpuPoolEndpoint.describe(pool, ManagedGraphs.NONE);
        assertThat(descriptor.kernels()).isEqualTo(new ManagedPool.Kernels("cuBLASLt 13.1.0", "bf16"));
        assertThat(descriptor.device()).isEqualTo("cuda:0");
        assertThat(descriptor.global().reservedBytes()).isEqualTo(fake.reserved.get());
        assertThat(descriptor.trace()).isNotNull();
        assertThat(pool.trim()).isEqualTo(fake.trimReleases);
        assertThat(fake.trims.get()).isEqualTo(1);
    }

    @Test
    void aPoolWithoutKernelsReportsNone() {
        assertThat(GpuPoolEndpoint.describe(new FakePool("host:0", false), ManagedGraphs.NONE).kernels()).isNull();
    }
}
