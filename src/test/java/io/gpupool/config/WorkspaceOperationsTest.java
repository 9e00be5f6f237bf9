package io.gpupool.config;

import io.gpupool.actuate.GpuPoolEndpoint;
import io.gpupool.actuate.GpuPoolMeterBinder;
import io.gpupool.actuate.ManagedPool;
import io.gpupool.actuate.ManagedPools;
import io.gpupool.backend.ComputeBackend;
import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.KernelModule;
import io.gpupool.backend.host.HostBackend;
import io.gpupool.kernels.TensorOps.Activation;
import io.gpupool.kernels.cuda.CudaTensorOps;
import io.gpupool.kernels.cuda.Precision;
import io.gpupool.kernels.cuda.FakeCublasLt;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.pool.DevicePool;
import io.gpupool.replay.SimulatedChunkSource;
import io.gpupool.serving.DeviceRuntime;
import io.gpupool.serving.DeviceWorker;
import io.gpupool.serving.ServingDevices;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What an operator sees of the kernels' stream workspaces through the serving wiring, without a GPU (CUDA kernels
 * over a host stream set, a fake cuBLASLt, a real pool): {@code /actuator/gpupool}'s {@code kernels.workspaces} and
 * the {@code gpupool.memory.workspace} meter count them as part of the allocated bytes, and a trim gives them back so
 * that the pool's allocated bytes return to 0.
 */
class WorkspaceOperationsTest {

    private final HostBackend host = new HostBackend();
    private final ComputeDevice hostDevice = host.devices().getFirst();
    private final SimulatedChunkSource chunks = new SimulatedChunkSource("test", 1L << 34);
    /** The host device with a chunk source of simulated memory and modules that resolve the shipped PTX. */
    private final ComputeDevice device = new ComputeDevice() {
        @Override public int index() { return 0; }
        @Override public String name() { return "fake-cuda"; }
        @Override public long totalMemory() { return chunks.capacityBytes(); }
        @Override public long freeMemory() { return chunks.capacityBytes(); }
        @Override public ChunkSource chunkSource() { return chunks; }
        @Override public Optional<DeviceAllocator> nativeAllocator(AllocatorMode mode) { return Optional.empty(); }
        @Override public DeviceStream createStream(int ordinal) { return hostDevice.createStream(ordinal); }
        @Override public KernelModule loadModule(String name, byte[] image) { return FakeCublasLt.module(name, image); }
        @Override public void bindToCurrentThread() { }
    };
    private final DevicePool pool = new DevicePool(chunks, PoolConfig.defaults());
    private final CudaTensorOps ops = new CudaTensorOps(device, Precision.BF16, FakeCublasLt.library(),
            pool);
    private final DeviceWorker worker = new DeviceWorker(device, pool, ops, 2, 4);
    private final ServingDevices devices = new ServingDevices(List.of(new DeviceRuntime(device, pool, pool, ops, worker)));

    @AfterEach
    void closeAll() {
        devices.close();
        host.close();
    }

    @Test
    void theEndpointAndTheMeterShowTheWorkspacesAndATrimGivesThemBack() {
        worker.submit(context -> {
            context.ops().linear(context.stream(), 0x1000, 0x2000, 0x3000, 0x4000, 8, 64, 64, Activation.NONE);
            return null;
        }).block();
        long one = ops.workspaces().orElseThrow().bytesPerStream();
        ManagedPools pools = new OperationsWiring().servingManagedPools(devices, new ComputeBackend() {
            @Override public String name() { return "cuda"; }
            @Override public List<ComputeDevice> devices() { return List.of(device); }
            @Override public void close() { }
        });
        ManagedPool managed = pools.all().getFirst();
        GpuPoolEndpoint endpoint = new GpuPoolEndpoint(pools);
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        new GpuPoolMeterBinder(pools).bindTo(registry);

        GpuPoolEndpoint.DeviceDescriptor before = endpoint.device("cuda:0");
        assertThat(before.kernels().workspaces()).isEqualTo(new ManagedPool.Workspaces(one, 0, 1, one, 0));
        assertThat(before.global().allocatedBytes()).isEqualTo(one);
        assertThat(registry.get("gpupool.memory.workspace").tag("device", "cuda:0").gauge().value()).isEqualTo(one);

        managed.trim();
        GpuPoolEndpoint.DeviceDescriptor after = endpoint.device("cuda:0");
        assertThat(after.kernels().workspaces()).isEqualTo(new ManagedPool.Workspaces(0, 0, 0, one, 1));
        assertThat(after.global().allocatedBytes()).as("the pool drained").isZero();
        assertThat(registry.get("gpupool.memory.workspace").gauge().value()).isZero();
    }
}
