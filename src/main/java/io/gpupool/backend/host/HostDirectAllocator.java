package io.gpupool.backend.host;

import io.gpupool.backend.DeviceStream;
import io.gpupool.backend.PerRequestAllocator;
import io.gpupool.memory.AllocationStream;
import io.gpupool.memory.metric.AllocatorMode;
import io.gpupool.memory.OutOfDeviceMemoryException;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The host's {@link AllocatorMode#DIRECT} baseline: C {@code aligned_alloc}/{@code free} per request
 * through FFM, the host analogue of cuMemAlloc/cuMemFree. Counts against the device budget.
 */
final class HostDirectAllocator extends PerRequestAllocator {

    private static final MethodHandle ALIGNED_ALLOC;
    private static final MethodHandle FREE;

    static {
        Linker linker = Linker.nativeLinker();
        ALIGNED_ALLOC = linker.downcallHandle(linker.defaultLookup().find("aligned_alloc").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG));
        FREE = linker.downcallHandle(linker.defaultLookup().find("free").orElseThrow(),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
    }

    private final HostMemoryBudget budget;

    HostDirectAllocator(HostMemoryBudget budget) {
        this.budget = budget;
    }

    @Override
    protected long allocateNative(long size, AllocationStream stream) {
        budget.reserve(size, describe());
        long address;
        try {
            address = ((MemorySegment) ALIGNED_ALLOC.invokeExact(GRANULE, size)).address();
        } catch (Throwable t) {
            budget.release(size);
            throw new IllegalStateException("aligned_alloc(" + GRANULE + ", " + size + ") failed", t);
        }
        if (address == 0) {
            budget.release(size);
            throw new OutOfDeviceMemoryException(size, describe() + ": aligned_alloc of " + size + " bytes returned NULL");
        }
        return address;
    }

    /**
     * Frees in stream order: work queued on the block's stream before the release may still read
     * the memory (cuMemFree gets this for free by synchronising; a host stream must queue the free).
     */
    @Override
    protected void freeNative(long address, long size, AllocationStream stream) {
        if (stream instanceof HostStream hostStream) {
            hostStream.runInStreamOrder(() -> freeNow(address, size));
        } else if (stream instanceof DeviceStream deviceStream) {
            deviceStream.enqueueHostTask(() -> freeNow(address, size));
        } else {
            freeNow(address, size);
        }
    }

    private void freeNow(long address, long size) {
        try {
            FREE.invokeExact(MemorySegment.ofAddress(address));
        } catch (Throwable t) {
            throw new IllegalStateException("free(0x" + Long.toHexString(address) + ") failed", t);
        }
        budget.release(size);
    }

    @Override
    protected String describe() {
        return "host direct";
    }

    @Override
    public AllocatorMode mode() {
        return AllocatorMode.DIRECT;
    }
}
