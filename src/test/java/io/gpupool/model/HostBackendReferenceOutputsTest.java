package io.gpupool.model;

import io.gpupool.backend.ComputeDevice;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.host.HostBackend;
import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.model.testing.TrackingAllocator;

/**
 * The reference outputs on the production host backend's stream, weights from its direct
 * allocator. Activations come from {@link TrackingAllocator}, whose frees are stream-ordered: the
 * host DIRECT allocator frees at once on release, while earlier-enqueued host tasks may still read
 * the block (the plan releases right after enqueueing a tensor's last reader, as the pool allows).
 */
class HostBackendReferenceOutputsTest extends ReferenceOutputsContract {

    @Override
    protected Backend openBackend() {
        HostBackend host = new HostBackend();
        ComputeDevice device = host.devices().getFirst();
        DeviceAllocator weights = device.nativeAllocator(AllocatorMode.DIRECT).orElseThrow();
        DeviceAllocator requests = new TrackingAllocator();
        DeviceStream stream = device.createStream(0);
        return new Backend(stream, weights, requests, new HostTensorOps(), () -> {
            stream.close();
            requests.close();
            weights.close();
            host.close();
        });
    }
}
