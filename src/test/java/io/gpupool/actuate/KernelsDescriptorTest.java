package io.gpupool.actuate;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code /actuator/gpupool} names each device's GEMM engine and activation type and shows the kernels' stream
 * workspaces as they are now; a trim gives the idle workspaces back before the pool trims; the pool's numbers stay
 * its own.
 */
class KernelsDescriptorTest {

    @Test
    void aPoolWithKernelsReportsThemAndDelegatesEverythingElse() {
        FakePool fake = new FakePool("cuda:0", true);
        AtomicLong workspaceBytes = new AtomicLong(4 * FakePool.MIB);
        List<String> calls = new ArrayList<>();
        ManagedPool pool = ManagedPool.withKernels(fake, () -> new ManagedPool.Kernels("cuBLASLt 13.1.0", "bf16",
                new ManagedPool.Workspaces(workspaceBytes.get(), 0, 4, FakePool.MIB, 0)), () -> {
                    calls.add("release workspaces (pool trims so far: " + fake.trims.get() + ")");
                    workspaceBytes.set(0);
                    return 4 * FakePool.MIB;
                }, null);
        GpuPoolEndpoint.DeviceDescriptor descriptor = GpuPoolEndpoint.describe(pool, ManagedGraphs.NONE);
        assertThat(descriptor.kernels()).isEqualTo(new ManagedPool.Kernels("cuBLASLt 13.1.0", "bf16",
                new ManagedPool.Workspaces(4 * FakePool.MIB, 0, 4, FakePool.MIB, 0)));
        assertThat(descriptor.device()).isEqualTo("cuda:0");
        assertThat(descriptor.global().reservedBytes()).isEqualTo(fake.reserved.get());
        assertThat(descriptor.trace()).isNotNull();

        assertThat(pool.trim()).isEqualTo(fake.trimReleases);
        assertThat(calls).containsExactly("release workspaces (pool trims so far: 0)");
        assertThat(fake.trims.get()).isEqualTo(1);
        assertThat(GpuPoolEndpoint.describe(pool, ManagedGraphs.NONE).kernels().workspaces().bytes())
                .as("read anew after the trim").isZero();
    }

    @Test
    void aPoolWithoutKernelsReportsNone() {
        assertThat(GpuPoolEndpoint.describe(new FakePool("host:0", false), ManagedGraphs.NONE).kernels()).isNull();
    }
}
