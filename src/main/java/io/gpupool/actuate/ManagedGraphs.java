package io.gpupool.actuate;

import io.gpupool.model.graph.GraphCacheControl;

import java.util.Map;
import java.util.Optional;

/** The graph caches of the devices that have them (CUDA), by device selector; empty on the host. */
public final class ManagedGraphs {

    public static final ManagedGraphs NONE = new ManagedGraphs(Map.of());

    private final Map<String, GraphCacheControl> byDevice;

    public ManagedGraphs(Map<String, GraphCacheControl> byDevice) {
        this.byDevice = Map.copyOf(byDevice);
    }

    public Optional<GraphCacheControl> find(String device) {
        return Optional.ofNullable(byDevice.get(device));
    }

    public Map<String, GraphCacheControl> all() {
        return byDevice;
    }
}
