package io.gpupool.actuate;

import io.gpupool.memory.MemoryAdmission;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/** A device's memory admission as operators read it: the endpoint's admission section and the meters. */
class AdmissionMetricsTest {

    private static final long MIB = FakePool.MIB;

    private final MemoryAdmission admission = new MemoryAdmission("host:0", true, () -> 100 * MIB, () -> 10 * MIB,
            bytes -> bytes);
    private final ManagedPool pool = ManagedPool.withKernels(new FakePool("host:0", false),
            () -> new ManagedPool.Kernels("host", "fp32", ManagedPool.Workspaces.NONE), () -> 0, admission);

    @Test
    void theEndpointShowsWaitingAdmittedAndRefusedRequestsWithTheCeiling() {
        MemoryAdmission.Ticket running = admission.acquire(60 * MIB, ticket -> { });
        admission.acquire(50 * MIB, ticket -> { });                       // waits: 60 + 50 > 90
        try {
            admission.acquire(95 * MIB, ticket -> { });
        } catch (RuntimeException refused) {
            // answered 507 by the server
        }

        GpuPoolEndpoint.AdmissionDescriptor section = new GpuPoolEndpoint(ManagedPools.of(List.of(pool)))
                .device("host:0").admission();

        assertThat(section).isNotNull();
        assertThat(section.enabled()).isTrue();
        assertThat(section.ceilingBytes()).isEqualTo(90 * MIB);
        assertThat(section.residentBytes()).isEqualTo(10 * MIB);
        assertThat(section.running()).isEqualTo(1);
        assertThat(section.admittedBytes()).isEqualTo(60 * MIB);
        assertThat(section.waiting()).isEqualTo(1);
        assertThat(section.waitingBytes()).isEqualTo(50 * MIB);
        assertThat(section.refused()).isEqualTo(1);
        running.release();
        assertThat(new GpuPoolEndpoint(ManagedPools.of(List.of(pool))).device("host:0").admission().waited())
                .isEqualTo(1);
    }

    @Test
    void theMetersReadTheAdmissionAtEachScrape() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        new GpuPoolMeterBinder(ManagedPools.of(List.of(pool))).bindTo(registry);
        MemoryAdmission.Ticket running = admission.acquire(80 * MIB, ticket -> { });
        MemoryAdmission.Ticket waiter = admission.acquire(20 * MIB, ticket -> { });

        assertThat(registry.get("gpupool.memory.admission.waiting").tag("device", "host:0").gauge().value()).isEqualTo(1);
        assertThat(registry.get("gpupool.memory.admission.waiting.bytes").gauge().value()).isEqualTo(20.0 * MIB);
        assertThat(registry.get("gpupool.memory.admission.ceiling").gauge().value()).isEqualTo(90.0 * MIB);
        running.release();
        waiter.release();
        assertThat(registry.get("gpupool.memory.admission.waiting").gauge().value()).isZero();
        assertThat(registry.get("gpupool.memory.admission.admitted").functionCounter().count()).isEqualTo(2);
        assertThat(registry.get("gpupool.memory.admission.waited").functionCounter().count()).isEqualTo(1);
        assertThat(registry.get("gpupool.memory.admission.wait").functionTimer().count()).isEqualTo(2);
        assertThat(registry.get("gpupool.memory.admission.wait").functionTimer().totalTime(TimeUnit.NANOSECONDS))
                .isPositive();
        assertThat(registry.get("gpupool.memory.admission.refused").functionCounter().count()).isZero();
    }
}
