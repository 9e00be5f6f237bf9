package io.gpupool.memory;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A reference-counted piece of device memory handed out by a {@link DeviceAllocator}.
 *
 * <p>Created with one reference. {@link #retain()} adds one, {@link #release()} removes one and
 * returns the memory to its owner when the count reaches zero. Releasing a block that is already
 * free is a bug in the caller and fails with a message naming the block.
 */
public final class DeviceBlock {

    /** Receives a block whose count reached zero. */
    @FunctionalInterface
    public interface Owner {
        void free(DeviceBlock block);
    }

    private static final VarHandle REF_COUNT;

    static {
        try {
            REF_COUNT = MethodHandles.lookup().findVarHandle(DeviceBlock.class, "refCount", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final Owner owner;
    private final long address;
    private final long size;
    private final long requestedBytes;
    private final AllocationStream stream;
    /** Allocator-private handle (e.g. a packed buddy position); opaque to everyone else. */
    private final long handle;
    /** Where the block was allocated, when allocation-site tracking is on; otherwise null. */
    private final Throwable allocationSite;
    @SuppressWarnings("unused") // accessed through REF_COUNT
    private volatile int refCount = 1;

    public DeviceBlock(Owner owner, long address, long size, long requestedBytes, AllocationStream stream,
                       long handle, Throwable allocationSite) {
        this.owner = owner;
        this.address = address;
        this.size = size;
        this.requestedBytes = requestedBytes;
        this.stream = stream;
        this.handle = handle;
        this.allocationSite = allocationSite;
    }

    public long address() {
        return address;
    }

    /** Bytes reserved for this block (the rounded size). */
    public long size() {
        return size;
    }

    /** Bytes the caller asked for. */
    public long requestedBytes() {
        return requestedBytes;
    }

    public AllocationStream stream() {
        return stream;
    }

    public long handle() {
        return handle;
    }

    public Throwable allocationSite() {
        return allocationSite;
    }

    public int refCount() {
        return (int) REF_COUNT.getVolatile(this);
    }

    /** Adds a reference; fails if the block was already freed. */
    public DeviceBlock retain() {
        while (true) {
            int current = (int) REF_COUNT.getVolatile(this);
            if (current <= 0) {
                throw new IllegalStateException("retain of a freed block: " + this);
            }
            if (REF_COUNT.compareAndSet(this, current, current + 1)) {
                return this;
            }
        }
    }

    /**
     * Drops a reference.
     *
     * @return true if this call freed the block
     * @throws IllegalStateException on a release after the count reached zero (double release)
     */
    public boolean release() {
        while (true) {
            int current = (int) REF_COUNT.getVolatile(this);
            if (current <= 0) {
                throw new IllegalStateException("double release of " + this);
            }
            if (REF_COUNT.compareAndSet(this, current, current - 1)) {
                if (current == 1) {
                    owner.free(this);
                    return true;
                }
                return false;
            }
        }
    }

    @Override
    public String toString() {
        return "DeviceBlock[address=0x" + Long.toHexString(address) + ", size=" + size
                + ", requested=" + requestedBytes + ", stream=" + (stream == null ? "none" : stream.ordinal()) + "]";
    }
}
