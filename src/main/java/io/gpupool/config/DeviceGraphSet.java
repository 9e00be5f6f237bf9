package io.gpupool.config;

import io.gpupool.model.InferenceModel;
import io.gpupool.model.graph.DeviceGraphs;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Map;

/**
 * The graphs of every device that has them (CUDA), by device index. Models loaded on a device are
 * wrapped by its {@link DeviceGraphs}; a device without graphs serves them as they are. Closed after
 * the model registry (whose models drop their graphs) and before the devices' pools.
 */
final class DeviceGraphSet implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(DeviceGraphSet.class);

    private final Map<Integer, DeviceGraphs> byDevice;

    DeviceGraphSet(Map<Integer, DeviceGraphs> byDevice) {
        this.byDevice = Map.copyOf(byDevice);
    }

    Map<Integer, DeviceGraphs> byDevice() {
        return byDevice;
    }

    /** {@code model}, loaded on device {@code index}, behind that device's graphs if it has them. */
    InferenceModel wrap(int index, InferenceModel model) {
        DeviceGraphs graphs = byDevice.get(index);
        return graphs == null ? model : graphs.wrap(model);
    }

    @Override
    public void close() {
        for (Map.Entry<Integer, DeviceGraphs> e : byDevice.entrySet()) {
            try {
                e.getValue().close();
            } catch (RuntimeException failure) {
                log.warn("Closing the graphs of device {} failed: {}", e.getKey(), failure.getMessage());
            }
        }
    }
}
