package io.gpupool.model;

import io.gpupool.kernels.host.HostTensorOps;
import io.gpupool.model.testing.TestStream;
import io.gpupool.model.testing.TrackingAllocator;

/** The reference outputs on the host kernels. */
class HostReferenceOutputsTest extends ReferenceOutputsContract {

    @Override
    protected Backend openBackend() {
        TestStream stream = new TestStream(0);
        TrackingAllocator weights = new TrackingAllocator();
        TrackingAllocator requests = new TrackingAllocator();
        return new Backend(stream, weights, requests, new HostTensorOps(), () -> {
            stream.close();
            requests.close();
            weights.close();
        });
    }
}
