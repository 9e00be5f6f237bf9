package io.gpupool.model.graph;

import io.gpupool.backend.DeviceGraph;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.GraphCapture;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.model.ExecutionContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Arrays;

/**
 * Captures one model's forward for one padded shape (a request's or a packed batch's: {@link PaddedForward}), on
 * the device's capture thread:
 * <ol>
 *   <li><b>dry run</b>: the forward's host code runs with {@link HostOnlyOps}, a {@link DryRunStream}
 *       and an {@link AllocationRecorder}; nothing reaches the device, and the recorder has every
 *       allocation's size and lifetime;</li>
 *   <li><b>layout</b>: {@link GraphMemoryLayout#pack} places them in one block;</li>
 *   <li><b>warm-up</b>: the forward runs eagerly, with the real kernels, on the capture stream, out of
 *       capture, in a scratch block of the layout plus the kernels' whole workspace bound (allocated on
 *       the graph stream, given back after the capture stream is synchronised). This plans every
 *       library call of the shape on the capture stream (no heuristic query while capturing), loads
 *       every kernel, and says how much workspace those plans use ({@code TensorOps.workspaceNeeded});</li>
 *   <li><b>room</b>: {@link GraphCache#reserve} evicts idle graphs until layout + workspace fits the
 *       cache's bounds (no room: the shape stays eager);</li>
 *   <li><b>block</b>: one allocation from the pool on the graph stream, which is then synchronised so
 *       that any fence the pool made it wait on has passed (the graph is launched on other streams);
 *       the pool's cap and its out-of-memory recovery apply as to any request. The block ends with the
 *       graph's own workspace, pinned for the capture stream ({@code TensorOps.useWorkspace}): graphs
 *       replay concurrently on different streams, so they cannot share one;</li>
 *   <li><b>capture</b>: the forward runs again with the real kernels on the capture stream, its
 *       allocations served from the block by a {@link GraphArena}: nothing allocates while capturing,
 *       and the capture stream never becomes a pool stream (no fence of it exists to be queried; the
 *       full rule list is in {@code backend/cuda/CudaGraphCapture});</li>
 *   <li><b>cache</b>: the instantiated graph, the block and the upload list become a
 *       {@link CapturedForward}.</li>
 * </ol>
 * Any failure on the way (dry run, warm-up, begin, body, end, instantiate) aborts the capture (which
 * leaves the capture stream out of capture mode and usable), gives the blocks back, logs one line and
 * counts a failure; the cache remembers the key (tried again only after many more misses, given up
 * after a few failures: {@link GraphCache}). The request that asked for the capture was already
 * answered eagerly, and the requests of that shape keep running eagerly.
 */
final class ForwardCapture {

    private static final Logger log = LoggerFactory.getLogger(ForwardCapture.class);

    private final GraphCapture capture;
    private final DeviceStream graphStream;
    private final DeviceAllocator pool;
    private final GraphCache cache;
    /**
     * The pool's cache for a stream has one user at a time; the graph stream's users are this capture
     * thread (allocating blocks) and whoever evicts (releasing them), so both hold this lock.
     */
    private final Object graphStreamLock = new Object();

    ForwardCapture(GraphCapture capture, DeviceStream graphStream, DeviceAllocator pool, GraphCache cache) {
        this.capture = capture;
        this.graphStream = graphStream;
        this.pool = pool;
        this.cache = cache;
    }

    /**
     * Captures {@code forward} (of the model named {@code model}, for the logs) as the graph of {@code key} and
     * caches it, or counts the failure.
     */
    void capture(String model, GraphKey key, PaddedForward<?> forward, TensorOps ops) {
        DeviceBlock block = null;
        try {
            AllocationRecorder recorder = new AllocationRecorder();
            forward.run(new ExecutionContext(new DryRunStream(graphStream), recorder, HostOnlyOps.over(ops)));
            GraphMemoryLayout layout = recorder.layout();
            long activations = GraphMemoryLayout.aligned(layout.blockBytes());
            if (activations > cache.maxBytes()) {
                cache.reserve(key, activations); // refuses, and remembers the key: no warm-up for a graph that cannot fit
                log.debug("No room for the graph of model '{}' at {} ({} bytes)", model, key, activations);
                return;
            }
            long workspace = GraphMemoryLayout.aligned(warmUp(forward, ops, layout, recorder, activations));
            if (!cache.reserve(key, activations + workspace)) {
                log.debug("No room for the graph of model '{}' at {} ({} bytes)", model, key,
                        activations + workspace);
                return;
            }
            block = allocate(activations + workspace);
            graphStream.synchronize();
            DeviceStream captureStream = capture.stream();
            ops.useWorkspace(captureStream, workspace == 0 ? 0 : block.address() + activations, workspace);
            GraphArena arena = new GraphArena(layout, recorder.requestedSizes(), block.address());
            Uploads uploads = new Uploads();
            DeviceGraph graph;
            try {
                DeviceStream stream = capture.begin(uploads);
                try {
                    forward.run(new ExecutionContext(stream, arena, ops));
                    arena.checkComplete();
                } catch (RuntimeException | Error e) {
                    capture.abort();
                    throw e;
                }
                graph = capture.end();
            } finally {
                ops.useWorkspace(captureStream, 0, 0);
            }
            DeviceBlock owned = block;
            block = null; // the entry owns it now
            cache.install(new CapturedForward(key, graph, owned, arena, uploads.addresses(), uploads.bytes(),
                    graphStreamLock));
        } catch (RuntimeException | Error e) {
            if (block != null) {
                try {
                    release(block);
                } catch (RuntimeException releaseFailure) {
                    e.addSuppressed(releaseFailure);
                }
            }
            cache.captureFailed(key);
            log.warn("Capturing the graph of model '{}' at {} failed, that shape runs eagerly: {}", model, key,
                    e.toString());
        }
    }

    /**
     * Runs the forward eagerly on the capture stream (out of capture), in a scratch block of
     * {@code activations} plus the kernels' workspace bound, and gives the block back once the stream
     * has finished with it.
     *
     * @return the workspace the forward's products use
     */
    private long warmUp(PaddedForward<?> forward, TensorOps ops, GraphMemoryLayout layout,
                        AllocationRecorder recorder, long activations) {
        long bound = GraphMemoryLayout.aligned(ops.workspaceBound());
        DeviceBlock scratch = allocate(activations + bound);
        DeviceStream captureStream = capture.stream();
        RuntimeException failure = null;
        try {
            graphStream.synchronize();
            ops.useWorkspace(captureStream, bound == 0 ? 0 : scratch.address() + activations, bound);
            GraphArena arena = new GraphArena(layout, recorder.requestedSizes(), scratch.address());
            forward.run(new ExecutionContext(captureStream, arena, ops));
            arena.checkComplete();
            captureStream.synchronize();
            return ops.workspaceNeeded(captureStream);
        } catch (RuntimeException e) {
            failure = e;
            throw e;
        } finally {
            ops.useWorkspace(captureStream, 0, 0);
            try {
                captureStream.synchronize(); // the scratch may still be in use by a forward that failed midway
                release(scratch);
            } catch (RuntimeException e) {
                if (failure == null) {
                    throw e;
                }
                failure.addSuppressed(e);
            }
        }
    }

    private DeviceBlock allocate(long bytes) {
        synchronized (graphStreamLock) {
            return pool.allocate(bytes, graphStream);
        }
    }

    private void release(DeviceBlock block) {
        synchronized (graphStreamLock) {
            block.release();
        }
    }

    /** The uploads a capture saw, in order. */
    private static final class Uploads implements GraphCapture.CopyListener {
        private long[] addresses = new long[4];
        private long[] bytes = new long[4];
        private int count;

        @Override
        public void hostToDevice(long deviceAddress, long size) {
            if (count == addresses.length) {
                addresses = Arrays.copyOf(addresses, count * 2);
                bytes = Arrays.copyOf(bytes, count * 2);
            }
            addresses[count] = deviceAddress;
            bytes[count] = size;
            count++;
        }

        @Override
        public void deviceToHost(long deviceAddress, long size) {
            // Replays check each download against the graph's block instead.
        }

        long[] addresses() {
            return Arrays.copyOf(addresses, count);
        }

        long[] bytes() {
            return Arrays.copyOf(bytes, count);
        }
    }
}
