package io.gpupool.memory.bestfit;

import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.ChunkSource;
import io.gpupool.memory.DeviceAllocator;
import io.gpupool.memory.DeviceBlock;
import io.gpupool.memory.OutOfDeviceMemoryException;
import io.gpupool.memory.StreamFence;
import io.gpupool.memory.metric.AllocatorMetrics;
import io.gpupool.memory.metric.BasicAllocatorMetrics;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Objects;
import java.util.TreeSet;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Best-fit free list with coalescing over chunks from a {@link ChunkSource} (the second seed's
 * design), kept as the comparison baseline for the two-level pool.
 *
 * <p><b>One lock guards everything.</b> Every allocate and free takes the same
 * {@link ReentrantLock}. That is deliberate: this class is the single-lock baseline the pool is
 * measured against (throughput that does not scale with threads is the point of comparison), not
 * a design to copy. Chunk allocation and release happen outside the lock.
 *
 * <h2>Notation and layout</h2>
 * <pre>
 *   chunk (from the source, a multiple of 2 MiB)
 *   +---------+-------------------+------+-------------------------+
 *   | used 3K |    free 40M       |used 1M|        free 20M        |
 *   +---------+-------------------+------+-------------------------+
 *    segment &lt;-prev/next-&gt; segment ... (address order, one chunk only)
 *
 *   free index : TreeSet ordered by (size, address)  -&gt; ceiling(size) is the best fit
 *   used index : HashMap address -&gt; segment           -&gt; O(1) lookup on free
 * </pre>
 * Every segment starts and ends on a 256-byte boundary (requests are rounded up to 256 bytes).
 * Segments never span chunks, so coalescing never joins memory from two chunks.
 *
 * <h2>Allocate(n)</h2>
 * <ol>
 *   <li>r = n rounded up to 256. Under the lock, take the smallest free segment with size &ge; r
 *       (ties: lowest address).</li>
 *   <li>If it is larger than r by at least 256 bytes, split it: the tail stays free.</li>
 *   <li>If the segment was last freed by another stream, make the new stream wait on that
 *       stream's fence (device-side, no host blocking).</li>
 *   <li>No fit: release the lock, take a chunk of max(chunkBytes, r rounded to 2 MiB) from the
 *       source, add it as one free segment, go to 1.</li>
 *   <li>The source refuses: give back every wholly free chunk, try once more; then fail with
 *       {@link OutOfDeviceMemoryException} stating requested, reserved, allocated, free, largest
 *       free segment and fragmentation.</li>
 * </ol>
 *
 * <h2>Free(block)</h2>
 * <ol>
 *   <li>Record a fence on the block's stream (outside the lock).</li>
 *   <li>Under the lock, mark the segment free and merge it with a free previous and a free next
 *       neighbour (the merged segment keeps every still-pending fence of its parts).</li>
 *   <li>Put the merged segment into the free index. Chunks are kept for reuse; {@link #trim()}
 *       returns wholly free chunks to the source.</li>
 * </ol>
 *
 * <p>Statistics never take the lock: byte totals, peaks, counters and allocation latency live in a
 * {@link BasicAllocatorMetrics} (atomics and adders); free bytes and the largest free segment are
 * volatile fields written under the lock and read without it.
 */
public final class BestFitAllocator implements DeviceAllocator {

    /** Alignment of every block, and the smallest split remainder. */
    public static final long ALIGNMENT = 256;
    /** Chunks are multiples of this size (the pool's chunk granule). */
    public static final long CHUNK_GRANULE = 2L << 20;
    /** Default growth step. */
    public static final long DEFAULT_CHUNK_BYTES = 64L << 20;

    private static final Comparator<Segment> BY_SIZE_THEN_ADDRESS = (a, b) -> {
        int c = Long.compare(a.size, b.size);
        return c != 0 ? c : Long.compare(a.address, b.address);
    };

    /** A pending fence shared by every free segment that covers memory freed under it. */
    private static final class FenceRef {
        final StreamFence fence;
        final int streamOrdinal;
        /** Order in which fences were attached; on one stream a later fence implies the earlier ones. */
        final long sequence;
        int refs = 1; // guarded by the allocator lock

        FenceRef(StreamFence fence, int streamOrdinal, long sequence) {
            this.fence = fence;
            this.streamOrdinal = streamOrdinal;
            this.sequence = sequence;
        }

        void release() {
            if (--refs == 0) {
                fence.close();
            }
        }
    }

    private static final class Chunk {
        final long base;
        final long bytes;

        Chunk(long base, long bytes) {
            this.base = base;
            this.bytes = bytes;
        }
    }

    private static final class Segment {
        long address;
        long size;
        boolean free;
        Segment prev;
        Segment next;
        final Chunk chunk;
        /** Fences of streams that freed parts of this free segment; null when none. */
        ArrayList<FenceRef> fences;
        /** Set while in use. */
        long requested;
        AllocationStream stream;
        Throwable site;

        Segment(Chunk chunk, long address, long size) {
            this.chunk = chunk;
            this.address = address;
            this.size = size;
        }
    }

    private final ChunkSource source;
    private final long chunkBytes;
    private final boolean trackAllocationSites;
    private final ReentrantLock lock = new ReentrantLock();
    private final DeviceBlock.Owner owner = this::free;

    // guarded by lock
    private final TreeSet<Segment> freeIndex = new TreeSet<>(BY_SIZE_THEN_ADDRESS);
    private final HashMap<Long, Segment> used = new HashMap<>();
    private final List<Chunk> chunks = new ArrayList<>();
    private final Segment probe = new Segment(null, Long.MIN_VALUE, 0);
    private long fenceSequence;
    private boolean closed;

    /** Reserved / allocated / requested bytes, peaks, counters and latency (lock-free; see its comment). */
    private final BasicAllocatorMetrics metrics;
    // free-space statistics: volatile, written under the lock (one writer at a time), read without it
    private volatile long freeBytes;
    private volatile long largestFreeBytes;

    /** A best-fit allocator growing by {@link #DEFAULT_CHUNK_BYTES}, without allocation-site tracking. */
    public BestFitAllocator(ChunkSource source) {
        this(source, DEFAULT_CHUNK_BYTES, false);
    }

    /**
     * @param chunkBytes growth step: a positive multiple of 2 MiB
     * @param trackAllocationSites record a stack trace per allocation, reported by {@link #close()}
     */
    public BestFitAllocator(ChunkSource source, long chunkBytes, boolean trackAllocationSites) {
        this.source = Objects.requireNonNull(source, "source");
        if (chunkBytes <= 0 || chunkBytes % CHUNK_GRANULE != 0) {
            throw new IllegalArgumentException("chunkBytes must be a positive multiple of 2 MiB ("
                    + CHUNK_GRANULE + "), got " + chunkBytes);
        }
        this.chunkBytes = chunkBytes;
        this.trackAllocationSites = trackAllocationSites;
        this.metrics = new BasicAllocatorMetrics(source.name(), AllocatorMode.BEST_FIT);
    }

    @Override
    public DeviceBlock allocate(long bytes, AllocationStream stream) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive, got " + bytes);
        }
        if (bytes > Long.MAX_VALUE - CHUNK_GRANULE) {
            recordFailure();
            throw new OutOfDeviceMemoryException(bytes, "cannot allocate " + bytes + " bytes: larger than any device");
        }
        long start = System.nanoTime();
        long rounded = (bytes + ALIGNMENT - 1) & -ALIGNMENT;
        Throwable site = trackAllocationSites ? new Throwable("allocated here") : null;
        boolean trimmed = false;
        while (true) {
            Segment segment = take(rounded, bytes, stream, site);
            if (segment != null) { // a free segment fit (possibly one a concurrent grow added)
                metrics.onAllocate(bytes, segment.size, System.nanoTime() - start);
                return new DeviceBlock(owner, segment.address, segment.size, bytes, stream, segment.address, site);
            }
            try {
                grow(rounded);
            } catch (OutOfDeviceMemoryException e) {
                if (!trimmed) { // give back wholly free chunks, then try the source once more
                    trimmed = true;
                    trim();
                    continue;
                }
                recordFailure();
                throw new OutOfDeviceMemoryException(bytes, describeOutOfMemory(bytes), e);
            }
        }
    }

    /** Finds, splits and marks in use the best-fitting free segment; null when none fits. */
    private Segment take(long rounded, long requested, AllocationStream stream, Throwable site) {
        lock.lock();
        try {
            if (closed) {
                throw new IllegalStateException("allocate on a closed allocator (" + source.name() + ")");
            }
            probe.size = rounded;
            Segment segment = freeIndex.ceiling(probe);
            if (segment == null) {
                return null;
            }
            freeIndex.remove(segment);
            long remainder = segment.size - rounded;
            if (remainder >= ALIGNMENT) {
                Segment tail = new Segment(segment.chunk, segment.address + rounded, remainder);
                tail.free = true;
                tail.prev = segment;
                tail.next = segment.next;
                if (segment.next != null) {
                    segment.next.prev = tail;
                }
                segment.next = tail;
                segment.size = rounded;
                if (segment.fences != null) {
                    tail.fences = new ArrayList<>(segment.fences);
                    for (FenceRef ref : tail.fences) {
                        ref.refs++;
                    }
                }
                freeIndex.add(tail);
            }
            if (segment.fences != null) {
                for (FenceRef ref : segment.fences) {
                    if (stream != null && ref.streamOrdinal != stream.ordinal() && !ref.fence.isComplete()) {
                        ref.fence.makeWait(stream);
                    }
                    ref.release();
                }
                segment.fences = null;
            }
            segment.free = false;
            segment.requested = requested;
            segment.stream = stream;
            segment.site = site;
            used.put(segment.address, segment);
            freeBytes -= segment.size;
            updateLargestFree();
            return segment;
        } finally {
            lock.unlock();
        }
    }

    private void grow(long rounded) {
        long granules = (rounded + CHUNK_GRANULE - 1) / CHUNK_GRANULE;
        long bytes = Math.max(chunkBytes, granules * CHUNK_GRANULE);
        long base = source.allocate(bytes); // outside the lock; throws OutOfDeviceMemoryException
        Chunk chunk = new Chunk(base, bytes);
        Segment whole = new Segment(chunk, base, bytes);
        whole.free = true;
        lock.lock();
        try {
            if (closed) {
                source.free(base, bytes);
                throw new IllegalStateException("allocate on a closed allocator (" + source.name() + ")");
            }
            chunks.add(chunk);
            freeIndex.add(whole);
            metrics.onReserve(bytes);
            freeBytes += bytes;
            updateLargestFree();
        } finally {
            lock.unlock();
        }
    }

    private void free(DeviceBlock block) {
        AllocationStream stream = block.stream();
        StreamFence fence = stream == null ? null : stream.recordFence(); // outside the lock
        lock.lock();
        try {
            Segment segment = used.remove(block.address());
            if (segment == null || closed) {
                if (fence != null) {
                    fence.close();
                }
                if (closed) {
                    return; // the chunk already went back at close(), which reported this block
                }
                throw new IllegalStateException("free of a block this allocator does not own: " + block);
            }
            metrics.onFree(segment.requested, segment.size);
            freeBytes += segment.size;
            segment.free = true;
            segment.stream = null;
            segment.site = null;
            if (fence != null) {
                segment.fences = new ArrayList<>(2);
                segment.fences.add(new FenceRef(fence, stream.ordinal(), ++fenceSequence));
            }
            Segment prev = segment.prev;
            if (prev != null && prev.free) { // merge into the previous neighbour
                freeIndex.remove(prev);
                prev.size += segment.size;
                prev.next = segment.next;
                if (segment.next != null) {
                    segment.next.prev = prev;
                }
                prev.fences = mergeFences(prev.fences, segment.fences);
                segment = prev;
            }
            Segment next = segment.next;
            if (next != null && next.free) { // absorb the next neighbour
                freeIndex.remove(next);
                segment.size += next.size;
                segment.next = next.next;
                if (next.next != null) {
                    next.next.prev = segment;
                }
                segment.fences = mergeFences(segment.fences, next.fences);
            }
            freeIndex.add(segment);
            updateLargestFree();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Concatenates two fence lists, dropping fences that have completed and, per stream, every
     * fence but the latest (a stream's later fence completes only after its earlier ones), so a
     * list never holds more fences than there are streams.
     */
    private static ArrayList<FenceRef> mergeFences(ArrayList<FenceRef> a, ArrayList<FenceRef> b) {
        if (a == null && b == null) {
            return null;
        }
        ArrayList<FenceRef> merged = new ArrayList<>();
        for (ArrayList<FenceRef> list : a == null ? List.of(b) : b == null ? List.of(a) : List.of(a, b)) {
            for (FenceRef ref : list) {
                if (ref.fence.isComplete()) {
                    ref.release();
                    continue;
                }
                int same = -1;
                for (int i = 0; i < merged.size() && same < 0; i++) {
                    if (merged.get(i).streamOrdinal == ref.streamOrdinal) {
                        same = i;
                    }
                }
                if (same < 0) {
                    merged.add(ref);
                } else if (merged.get(same).sequence < ref.sequence) {
                    merged.get(same).release();
                    merged.set(same, ref);
                } else {
                    ref.release();
                }
            }
        }
        return merged.isEmpty() ? null : merged;
    }

    /**
     * Returns every wholly free chunk to the source (waiting for the fences of streams that last
     * used it first). Returns the bytes released.
     */
    public long trim() {
        List<Segment> released = new ArrayList<>();
        lock.lock();
        try {
            for (int i = chunks.size() - 1; i >= 0; i--) {
                Chunk chunk = chunks.get(i);
                // a wholly free chunk is one free segment spanning the chunk
                Segment candidate = findWholeFreeSegment(chunk);
                if (candidate != null) {
                    freeIndex.remove(candidate);
                    chunks.remove(i);
                    metrics.onUnreserve(chunk.bytes);
                    freeBytes -= chunk.bytes;
                    released.add(candidate);
                }
            }
            updateLargestFree();
        } finally {
            lock.unlock();
        }
        long bytes = 0;
        for (Segment segment : released) {
            awaitAndCloseFences(segment);
            source.free(segment.chunk.base, segment.chunk.bytes);
            bytes += segment.chunk.bytes;
        }
        return bytes;
    }

    private Segment findWholeFreeSegment(Chunk chunk) {
        probe.size = chunk.bytes;
        probe.address = chunk.base;
        Segment candidate = freeIndex.ceiling(probe);
        probe.address = Long.MIN_VALUE;
        return candidate != null && candidate.address == chunk.base && candidate.size == chunk.bytes
                ? candidate : null;
    }

    private static void awaitAndCloseFences(Segment segment) {
        if (segment.fences != null) {
            for (FenceRef ref : segment.fences) {
                ref.fence.await();
                ref.release();
            }
            segment.fences = null;
        }
    }

    private void updateLargestFree() {
        largestFreeBytes = freeIndex.isEmpty() ? 0 : freeIndex.last().size;
    }

    private void recordFailure() {
        metrics.onFailure();
    }

    private String describeOutOfMemory(long bytes) {
        long free = freeBytes;
        long largest = largestFreeBytes;
        double fragmentation = free == 0 ? 0.0 : 1.0 - (double) largest / free;
        return String.format("best-fit allocator on %s cannot allocate %d bytes: reserved %d, allocated %d "
                        + "(rounded %d), free in chunks %d, largest free segment %d, fragmentation %.3f",
                source.name(), bytes, metrics.reservedBytes(), metrics.requestedBytes(), metrics.allocatedBytes(), free, largest,
                fragmentation);
    }

    @Override
    public AllocatorMode mode() {
        return AllocatorMode.BEST_FIT;
    }

    /**
     * Returns every chunk to the source. If blocks are still outstanding, their memory goes back
     * too and an {@link IllegalStateException} lists them (size, stream, allocation site when
     * tracking is on); releasing such a block later is a no-op.
     */
    @Override
    public void close() {
        List<Segment> outstanding;
        List<Chunk> toFree;
        List<Segment> freeSegments;
        lock.lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            outstanding = new ArrayList<>(used.values());
            used.clear();
            toFree = new ArrayList<>(chunks);
            chunks.clear();
            freeSegments = new ArrayList<>(freeIndex);
            freeIndex.clear();
            for (Segment segment : outstanding) {
                metrics.onFree(segment.requested, segment.size);
            }
            for (Chunk chunk : toFree) {
                metrics.onUnreserve(chunk.bytes);
            }
            freeBytes = 0;
            largestFreeBytes = 0;
        } finally {
            lock.unlock();
        }
        for (Segment segment : freeSegments) {
            awaitAndCloseFences(segment);
        }
        for (Chunk chunk : toFree) {
            source.free(chunk.base, chunk.bytes);
        }
        if (!outstanding.isEmpty()) {
            outstanding.sort(Comparator.comparingLong(s -> s.address));
            StringBuilder message = new StringBuilder("best-fit allocator on ").append(source.name())
                    .append(" closed with ").append(outstanding.size()).append(" outstanding block(s):");
            int shown = 0;
            for (Segment s : outstanding) {
                if (shown++ == 16) {
                    message.append("\n  ... and ").append(outstanding.size() - 16).append(" more");
                    break;
                }
                message.append("\n  ").append(s.requested).append(" bytes at 0x").append(Long.toHexString(s.address))
                        .append(", stream ").append(s.stream == null ? "none" : s.stream.ordinal());
                if (s.site != null) {
                    message.append(", allocated at ").append(callerOf(s.site));
                }
            }
            throw new IllegalStateException(message.toString());
        }
    }

    /** The first frame of {@code site} outside this allocator (and outside decorators that delegate to it). */
    private static String callerOf(Throwable site) {
        for (StackTraceElement frame : site.getStackTrace()) {
            String cls = frame.getClassName();
            if (!cls.startsWith("io.gpupool.memory.")) {
                return frame.toString();
            }
            if (cls.endsWith("Test")) {
                return frame.toString();
            }
        }
        return "unknown";
    }

    @Override
    public AllocatorMetrics metrics() {
        return metrics;
    }

    /** Bytes of chunks held from the source. */
    public long reservedBytes() {
        return metrics.reservedBytes();
    }

    /** Bytes requested by live blocks. */
    public long requestedBytes() {
        return metrics.requestedBytes();
    }

    /** Bytes of live blocks after rounding to 256. */
    public long allocatedBytes() {
        return metrics.allocatedBytes();
    }

    /** Free bytes inside held chunks. */
    public long freeBytes() {
        return freeBytes;
    }

    public long largestFreeBytes() {
        return largestFreeBytes;
    }

    /** 1 - largest free / total free; 0 when nothing is free. */
    public double fragmentation() {
        long free = freeBytes;
        return free == 0 ? 0.0 : 1.0 - (double) largestFreeBytes / free;
    }

    @Override
    public String toString() {
        return "BestFitAllocator[" + source.name() + ", reserved=" + metrics.reservedBytes() + ", allocated="
                + metrics.allocatedBytes()
                + ", largestFree=" + largestFreeBytes + "]";
    }
}
