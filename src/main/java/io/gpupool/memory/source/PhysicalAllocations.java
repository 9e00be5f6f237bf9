package io.gpupool.memory.source;

import java.util.HashMap;
import java.util.Map;

/**
 * The bookkeeping behind {@link io.gpupool.memory.VirtualMemory}'s physical calls for a source that
 * has no driver handles of its own (the host, simulated and test sources): which handles exist and
 * their sizes, and which handle is mapped at which extent address. Every misuse (an unknown handle,
 * a handle mapped twice, a size that does not match, releasing a mapped handle, unmapping an extent
 * that is not mapped as one) throws {@link IllegalArgumentException} before anything changes.
 *
 * <pre>
 *   handles   1 -&gt; 32 MiB   2 -&gt; 32 MiB   3 -&gt; 2 MiB        created, not released
 *   mappedAt  0x7f..000 -&gt; 2                                 extent address -&gt; its handle
 * </pre>
 * One monitor guards both maps; callers do their system calls outside it.
 */
public final class PhysicalAllocations {

    private final String owner;
    private long nextHandle = 1;
    private final Map<Long, Long> sizes = new HashMap<>();
    private final Map<Long, Long> mappedAt = new HashMap<>();
    private final Map<Long, Long> addressOf = new HashMap<>();

    public PhysicalAllocations(String owner) {
        this.owner = owner;
    }

    /** Records a new handle of {@code bytes}. */
    public synchronized long create(long bytes) {
        long handle = nextHandle++;
        sizes.put(handle, bytes);
        return handle;
    }

    /** Forgets a handle that is mapped nowhere; returns its size. */
    public synchronized long release(long handle) {
        Long bytes = sizes.get(handle);
        if (bytes == null) {
            throw new IllegalArgumentException(owner + ": release of unknown physical handle " + handle);
        }
        if (addressOf.containsKey(handle)) {
            throw new IllegalArgumentException(owner + ": release of physical handle " + handle + " still mapped at 0x"
                    + Long.toHexString(addressOf.get(handle)));
        }
        sizes.remove(handle);
        return bytes;
    }

    /** Records {@code handles[0..count)} as mapped back to back from {@code address}. */
    public synchronized void map(long address, long extentBytes, long[] handles, int count) {
        for (int i = 0; i < count; i++) {
            long handle = handles[i];
            Long bytes = sizes.get(handle);
            if (bytes == null || bytes != extentBytes || addressOf.containsKey(handle)) {
                throw new IllegalArgumentException(owner + ": map of physical handle " + handle + " as an extent of "
                        + extentBytes + " bytes: " + (bytes == null ? "unknown handle" : bytes != extentBytes
                        ? "it has " + bytes + " bytes" : "already mapped at 0x" + Long.toHexString(addressOf.get(handle))));
            }
            for (int j = 0; j < i; j++) {
                if (handles[j] == handle) {
                    throw new IllegalArgumentException(owner + ": physical handle " + handle + " given twice to one map");
                }
            }
        }
        for (int i = 0; i < count; i++) {
            long at = address + i * extentBytes;
            mappedAt.put(at, handles[i]);
            addressOf.put(handles[i], at);
        }
    }

    /** Forgets the extents mapped from {@code address}, writing their handles to {@code handles[0..count)}. */
    public synchronized void unmap(long address, long extentBytes, long[] handles, int count) {
        for (int i = 0; i < count; i++) {
            long at = address + i * extentBytes;
            Long handle = mappedAt.get(at);
            if (handle == null || sizes.get(handle) != extentBytes) {
                throw new IllegalArgumentException(owner + ": unmap at 0x" + Long.toHexString(at) + ": no physical extent of "
                        + extentBytes + " bytes is mapped there");
            }
        }
        for (int i = 0; i < count; i++) {
            long handle = mappedAt.remove(address + i * extentBytes);
            addressOf.remove(handle);
            handles[i] = handle;
        }
    }

    /** Handles created and not released. */
    public synchronized int live() {
        return sizes.size();
    }

    /** Bytes of the handles created and not released. */
    public synchronized long liveBytes() {
        long total = 0;
        for (long bytes : sizes.values()) {
            total += bytes;
        }
        return total;
    }
}
