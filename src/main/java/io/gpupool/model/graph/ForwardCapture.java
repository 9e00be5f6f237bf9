package io.gpupool.model.graph;

import io.gpupool.backend.DeviceGraph;
import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.GraphCapture;
import io.gpupool.kernels.TensorOps;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.model.ExecutionContext;
import io.gpupool.model.HostTensor;
import io.gpupool.model.InferenceModel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Arrays;
import java.util.List;
import java.util.Set;

/**
 * Captures one model's forward for one padded shape, on the device's capture thread:
 * <ol>
 *   <li><b>dry run</b>: the forward's host code runs with {@link HostOnlyOps}, a {@link DryRunStream}
 *       and an {@link AllocationRecorder}; nothing reaches the device, and the recorder has every
 *       allocation's size and lifetime;</li>
 *   <li><b>layout</b>: {@link GraphMemoryLayout#pack} places them in one block;</li>
 *   <li><b>room</b>: {@link GraphCache#reserve} evicts idle graphs until the block fits the cache's
 *       bounds (no room: the shape stays eager);</li>
 *   <li><b>block</b>: one allocation from the pool on the graph stream, which is then synchronised so
 *       that any fence the pool made it wait on has passed (the graph is launched on other streams);
 *       the pool's cap and its out-of-memory recovery apply as to any request;</li>
 *   <li><b>capture</b>: the forward runs again with the real kernels on the capture stream, its
 *       allocations served from the block by a {@link GraphArena} (no driver allocation while
 *       capturing); its uploads are noted, its downloads and synchronize do nothing;</li>
 *   <li><b>cache</b>: the instantiated graph, the block and the upload list become a
 *       {@link CapturedForward}. Any failure on the way aborts the capture, gives the block back,
 *       logs one line and counts a failure; the requests of that shape keep running eagerly.</li>
 * </ol>
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

    void capture(InferenceModel model, GraphKey key, List<HostTensor> inputs, Set<String> outputs, TensorOps ops) {
        DeviceBlock block = null;
        try {
            AllocationRecorder recorder = new AllocationRecorder();
            model.infer(inputs, outputs, new ExecutionContext(new DryRunStream(graphStream), recorder,
                    HostOnlyOps.over(ops)));
            GraphMemoryLayout layout = recorder.layout();
            if (!cache.reserve(key, layout.blockBytes())) {
                log.debug("No room for the graph of model '{}' at {} ({} bytes)", model.name(), key, layout.blockBytes());
                return;
            }
            synchronized (graphStreamLock) {
                block = pool.allocate(layout.blockBytes(), graphStream);
            }
            graphStream.synchronize();
            GraphArena arena = new GraphArena(layout, recorder.requestedSizes(), block.address());
            Uploads uploads = new Uploads();
            DeviceStream stream = capture.begin(uploads);
            DeviceGraph graph;
            try {
                model.infer(inputs, outputs, new ExecutionContext(stream, arena, ops));
                arena.checkComplete();
            } catch (RuntimeException | Error e) {
                capture.abort();
                throw e;
            }
            graph = capture.end();
            DeviceBlock owned = block;
            block = null; // the entry owns it now
            cache.install(new CapturedForward(key, graph, owned, arena, uploads.addresses(), uploads.bytes(),
                    graphStreamLock));
        } catch (RuntimeException | Error e) {
            if (block != null) {
                try {
                    synchronized (graphStreamLock) {
                        block.release();
                    }
                } catch (RuntimeException releaseFailure) {
                    e.addSuppressed(releaseFailure);
                }
            }
            cache.captureFailed(key);
            log.warn("Capturing the graph of model '{}' at {} failed, that shape runs eagerly: {}", model.name(), key,
                    e.toString());
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
