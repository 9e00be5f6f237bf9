package io.gpupool.memory;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A reference-counted piece of device memory handed out by a {@link DeviceAllocator}.
 *
 * <p>Created with one reference. {@link #retain()} adds one, {@link #release()} removes one and
 * returns the memory to its owner when the count reaches zero. Releasing a block that is already
 * free is a bug in the caller and fails with a message naming the block.
 *
 * <h2>The count, and why the common case takes no atomic instruction</h2>
 * The field holds the references beyond the first ({@code extra = count - 1}), so a new block needs no
 * store at all: the default 0 is one reference. (A volatile field initialised to 1 would put a full
 * fence in every allocation.) Freed is {@code -1}.
 * <pre>
 *   extra:   -1 freed  |  0 one reference (new block)  |  n  n + 1 references
 *   retain:  CAS n -&gt; n + 1 (n &gt;= 0)
 *   release: n &gt; 0: CAS n -&gt; n - 1                 (other holders may release at the same time)
 *            n = 0: store -1, then free            (the caller holds the only reference: nobody else
 *                                                     may legally touch the block, so no CAS is needed)
 * </pre>
 * A release that reads 0 while another thread retains or releases at the same moment is already a
 * bug of the caller (it used a block whose last reference was being dropped); the check that
 * catches a second release on the same thread, or on a thread that saw the first, stays exact.
 */
public final class DeviceBlock {

    /** Receives a block whose count reached zero. */
    @FunctionalInterface
    public interface Owner {
        void free(DeviceBlock block);

        /**
         * Receives a block whose last reference was dropped by {@link #releaseSettled}: no work queued on its
         * stream uses it any more. An owner that fences what it hands to other streams may skip the fence.
         */
        default void freeSettled(DeviceBlock block) {
            free(block);
        }
    }

    /** An {@link Owner} that receives both kinds of free in one method. */
    @FunctionalInterface
    public interface SettlingOwner extends Owner {
        /** @param settled the last reference went with {@link #releaseSettled} */
        void free(DeviceBlock block, boolean settled);

        @Override
        default void free(DeviceBlock block) {
            free(block, false);
        }

        @Override
        default void freeSettled(DeviceBlock block) {
            free(block, true);
        }
    }

    private static final VarHandle EXTRA_REFS;
    private static final int FREED = -1;

    static {
        try {
            EXTRA_REFS = MethodHandles.lookup().findVarHandle(DeviceBlock.class, "extraRefs", int.class);
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
    /** References beyond the first; {@value #FREED} once freed (see the class comment). */
    @SuppressWarnings("unused") // accessed through EXTRA_REFS
    private volatile int extraRefs;

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
        return (int) EXTRA_REFS.getVolatile(this) + 1;
    }

    /** Adds a reference; fails if the block was already freed. */
    public DeviceBlock retain() {
        while (true) {
            int extra = (int) EXTRA_REFS.getVolatile(this);
            if (extra == FREED) {
                throw new IllegalStateException("retain of a freed block: " + this);
            }
            if (EXTRA_REFS.compareAndSet(this, extra, extra + 1)) {
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
        return release(false);
    }

    /**
     * Drops a reference, for a caller that synchronised the block's stream on the host after the last work it
     * queued on the block (and queued none since): if this frees the block, the owner knows no fence is needed
     * before another stream takes it ({@link Owner#freeSettled}). A caller unsure of that calls {@link #release}:
     * a wrong promise here lets another stream overwrite memory that kernels still read.
     *
     * @return true if this call freed the block
     * @throws IllegalStateException on a release after the count reached zero (double release)
     */
    public boolean releaseSettled() {
        return release(true);
    }

    private boolean release(boolean settled) {
        while (true) {
            int extra = (int) EXTRA_REFS.getVolatile(this);
            if (extra == FREED) {
                throw new IllegalStateException("double release of " + this);
            }
            if (extra == 0) {
                EXTRA_REFS.setRelease(this, FREED);                  // the only reference: see the class comment
                if (settled) {
                    owner.freeSettled(this);
                } else {
                    owner.free(this);
                }
                return true;
            }
            if (EXTRA_REFS.compareAndSet(this, extra, extra - 1)) {
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
