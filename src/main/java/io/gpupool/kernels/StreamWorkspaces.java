package io.gpupool.kernels;

import io.gpupool.backend.DeviceStream;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * Scratch memory a library needs per stream (cuBLASLt's matmul workspace), taken from the device's activation
 * pool on a stream's first use and kept while the stream is busy, so that a stream's products always see one
 * address and a run allocates nothing.
 *
 * <pre>
 *   stream ──► Workspace { block: one pool block of bytesPerStream,  captured: a graph recorded its address }
 *
 *   address(s)   held? ── yes ─► its address (marked captured if s is capturing a graph now)
 *                  │ no
 *                  ▼
 *                pool.allocate(bytesPerStream, s) ─► held
 *   release(s)   held and not captured ─► block back to the pool (stream-ordered, like any free on s);
 *                                          the next address(s) allocates again, perhaps elsewhere
 *   close()      every block back, captured ones included (the graphs are gone by then)
 * </pre>
 *
 * <h2>Why release at all</h2>
 * A server that went idle should hold nothing in its pool but what a model keeps (graphs, caches that say so),
 * so that "allocated bytes back at 0" stays a leak check and an idle pool can return its memory to the device.
 * The owner of the streams releases idle streams' workspaces (after an idle period, or on a trim) and they come
 * back on the next product.
 *
 * <h2>Rules</h2>
 * <ol>
 *   <li>{@link #address} is called by the stream's current user (the request that holds it): one caller per
 *       stream at a time, as for the pool's local cache of that stream.</li>
 *   <li>{@link #release} is called only by whoever holds the stream's lease between requests, so no product is
 *       being enqueued on it; work still running on the device is covered by the pool's stream order (the block
 *       was allocated on that stream and is freed on it, so another stream reusing it first waits for it).</li>
 *   <li>A workspace handed out while its stream {@linkplain DeviceStream#capturing() captures} a graph is pinned
 *       until {@link #close}: the graph's recorded products write to that address whenever it is replayed, so
 *       the block must outlive every graph, which only close (after the graphs) guarantees.</li>
 * </ol>
 * Byte counters are {@link AtomicLong}s written by the stream users and the releasing owner, read by metrics
 * without a lock.
 */
public final class StreamWorkspaces implements AutoCloseable {

    private final DeviceAllocator pool;
    private final long bytesPerStream;
    private final Map<DeviceStream, Workspace> held = new ConcurrentHashMap<>();
    private final AtomicLong heldBytes = new AtomicLong();
    private final AtomicLong capturedBytes = new AtomicLong();
    private final LongAdder released = new LongAdder();
    private volatile boolean closed;

    private static final class Workspace {
        final DeviceBlock block;
        /** Written by the stream's user only (rule 1); read by the releasing owner after the lease hand-over. */
        boolean captured;

        Workspace(DeviceBlock block) {
            this.block = block;
        }
    }

    /**
     * @param pool           where the blocks come from (the device's activation pool)
     * @param bytesPerStream the size of one workspace, positive
     */
    public StreamWorkspaces(DeviceAllocator pool, long bytesPerStream) {
        if (bytesPerStream <= 0) {
            throw new IllegalArgumentException("bytesPerStream = " + bytesPerStream + " is invalid; allowed: > 0");
        }
        this.pool = Objects.requireNonNull(pool, "pool");
        this.bytesPerStream = bytesPerStream;
    }

    /** Bytes of one workspace. */
    public long bytesPerStream() {
        return bytesPerStream;
    }

    /**
     * The workspace of {@code stream}, allocated from the pool if it holds none (rule 1).
     *
     * @throws io.gpupool.memory.OutOfDeviceMemoryException as the pool's allocate does
     * @throws IllegalStateException after {@link #close}
     */
    public long address(DeviceStream stream) {
        Workspace workspace = held.get(stream);
        if (workspace == null) {
            if (closed) {
                throw new IllegalStateException("the stream workspaces are closed");
            }
            workspace = new Workspace(pool.allocate(bytesPerStream, stream));
            held.put(stream, workspace);
            heldBytes.addAndGet(workspace.block.size());
        }
        if (!workspace.captured && stream.capturing()) {
            workspace.captured = true;                     // rule 3: pinned for the graphs that record it
            capturedBytes.addAndGet(workspace.block.size());
        }
        return workspace.block.address();
    }

    /**
     * Gives the workspace of idle {@code stream} back to the pool (rule 2); a captured one stays.
     *
     * @return the bytes given back (0 when the stream held none or its workspace is captured)
     */
    public long release(DeviceStream stream) {
        Workspace workspace = held.get(stream);
        if (workspace == null || workspace.captured) {
            return 0;
        }
        held.remove(stream);
        long bytes = workspace.block.size();
        heldBytes.addAndGet(-bytes);
        workspace.block.release();
        released.increment();
        return bytes;
    }

    /** Pool bytes held as workspaces now, captured ones included. */
    public long heldBytes() {
        return heldBytes.get();
    }

    /** Of {@link #heldBytes()}, the bytes pinned because a graph captured their address (rule 3). */
    public long capturedBytes() {
        return capturedBytes.get();
    }

    /** Streams holding a workspace now. */
    public int streams() {
        return held.size();
    }

    /** Workspaces given back by {@link #release} since start. */
    public long releases() {
        return released.sum();
    }

    /**
     * Gives every workspace back, captured ones included; call when no stream runs and the graphs that captured
     * any are destroyed. Later {@link #address} calls fail.
     */
    @Override
    public void close() {
        closed = true;
        List<RuntimeException> failures = new ArrayList<>();
        for (Map.Entry<DeviceStream, Workspace> entry : held.entrySet()) {
            DeviceBlock block = entry.getValue().block;
            held.remove(entry.getKey());
            heldBytes.addAndGet(-block.size());
            if (entry.getValue().captured) {
                capturedBytes.addAndGet(-block.size());
            }
            try {
                block.release();
            } catch (RuntimeException e) {
                failures.add(e);
            }
        }
        if (!failures.isEmpty()) {
            RuntimeException first = failures.getFirst();
            failures.subList(1, failures.size()).forEach(first::addSuppressed);
            throw first;
        }
    }
}
