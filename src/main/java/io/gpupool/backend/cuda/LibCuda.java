package io.gpupool.backend.cuda;

import io.gpupool.memory.OutOfDeviceMemoryException;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A small FFM binding to {@code libcuda.so.1} for what JCuda 12.6 lacks or binds wrongly: the
 * attributes of a device's default memory pool (used by the CUDA_ASYNC baseline) and the virtual
 * memory management calls (used by {@link ExpandableChunkSource} and the mapping half of
 * {@link CudaChunkSource}).
 *
 * <p>Every call works on the context current on the calling thread, the same one JCuda uses (both
 * talk to the one libcuda in the process). Structures are written by hand into zeroed scratch
 * memory, larger than the C struct so that fields added by newer drivers read as zero:
 * <pre>
 *   CUmemAllocationProp (32 bytes)          CUmemAccessDesc (12 bytes)
 *   0  int  type            = 1 (PINNED)    0  int location.type = 1 (DEVICE)
 *   4  int  requestedHandleTypes = 0        4  int location.id   = device ordinal
 *   8  int  location.type   = 1 (DEVICE)    8  int flags         = 3 (PROT_READWRITE)
 *   12 int  location.id     = device
 *   16 ptr  win32HandleMetaData = 0
 *   24 8 x byte allocFlags  = 0
 * </pre>
 */
final class LibCuda {

    // CUmemPool_attribute values; all of these are cuuint64_t, read and written through a pointer to 8 bytes.
    static final int MEMPOOL_ATTR_RELEASE_THRESHOLD = 4;
    /** Memory the pool currently holds from the device (what it keeps after frees included). */
    static final int MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5;
    /** High-water mark of {@link #MEMPOOL_ATTR_RESERVED_MEM_CURRENT}; setting it to 0 resets it (no other value). */
    static final int MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6;
    /** Memory of the pool currently handed out to the application. */
    static final int MEMPOOL_ATTR_USED_MEM_CURRENT = 7;
    /** High-water mark of {@link #MEMPOOL_ATTR_USED_MEM_CURRENT}; setting it to 0 resets it (no other value). */
    static final int MEMPOOL_ATTR_USED_MEM_HIGH = 8;
    private static final int MEM_ALLOCATION_TYPE_PINNED = 1;
    private static final int MEM_LOCATION_TYPE_DEVICE = 1;
    private static final int MEM_ACCESS_FLAGS_PROT_READWRITE = 3;
    private static final int MEM_ALLOC_GRANULARITY_MINIMUM = 0;
    private static final int CUDA_ERROR_OUT_OF_MEMORY = 2;
    private static final long SCRATCH = 64;

    private static volatile LibCuda instance;

    private final MethodHandle deviceGetDefaultMemPool;
    private final MethodHandle memPoolSetAttribute;
    private final MethodHandle memPoolGetAttribute;
    private final MethodHandle memAddressReserve;
    private final MethodHandle memAddressFree;
    private final MethodHandle memCreate;
    private final MethodHandle memRelease;
    private final MethodHandle memMap;
    private final MethodHandle memUnmap;
    private final MethodHandle memSetAccess;
    private final MethodHandle memGetAllocationGranularity;

    private LibCuda(SymbolLookup lib) {
        Linker linker = Linker.nativeLinker();
        deviceGetDefaultMemPool = bind(linker, lib, "cuDeviceGetDefaultMemPool", ADDRESS, JAVA_INT);
        memPoolSetAttribute = bind(linker, lib, "cuMemPoolSetAttribute", ADDRESS, JAVA_INT, ADDRESS);
        memPoolGetAttribute = bind(linker, lib, "cuMemPoolGetAttribute", ADDRESS, JAVA_INT, ADDRESS);
        memAddressReserve = bind(linker, lib, "cuMemAddressReserve", ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);
        memAddressFree = bind(linker, lib, "cuMemAddressFree", JAVA_LONG, JAVA_LONG);
        memCreate = bind(linker, lib, "cuMemCreate", ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG);
        memRelease = bind(linker, lib, "cuMemRelease", JAVA_LONG);
        memMap = bind(linker, lib, "cuMemMap", JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);
        memUnmap = bind(linker, lib, "cuMemUnmap", JAVA_LONG, JAVA_LONG);
        memSetAccess = bind(linker, lib, "cuMemSetAccess", JAVA_LONG, JAVA_LONG, ADDRESS, JAVA_LONG);
        memGetAllocationGranularity = bind(linker, lib, "cuMemGetAllocationGranularity", ADDRESS, ADDRESS, JAVA_INT);
    }

    /** The binding, loaded once; throws IllegalArgumentException when libcuda.so.1 cannot be found. */
    static LibCuda get() {
        LibCuda lib = instance;
        if (lib == null) {
            synchronized (LibCuda.class) {
                lib = instance;
                if (lib == null) {
                    lib = new LibCuda(SymbolLookup.libraryLookup("libcuda.so.1", Arena.global()));
                    instance = lib;
                }
            }
        }
        return lib;
    }

    private static MethodHandle bind(Linker linker, SymbolLookup lib, String name, MemoryLayout... args) {
        MemorySegment symbol = lib.find(name).orElseThrow(
                () -> new IllegalStateException("libcuda.so.1 has no symbol " + name + " (driver too old?)"));
        return linker.downcallHandle(symbol, FunctionDescriptor.of(JAVA_INT, args));
    }

    /** CUmemoryPool handle of {@code device}'s default pool. */
    long deviceDefaultMemPool(int device) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ADDRESS);
            check("cuDeviceGetDefaultMemPool", (int) deviceGetDefaultMemPool.invokeExact(out, device));
            return out.get(ADDRESS, 0).address();
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Sets a 64-bit attribute (e.g. the release threshold, or 0 into a high-water mark) of a memory pool. */
    void setMemPoolAttribute(long pool, int attribute, long value) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment in = arena.allocate(JAVA_LONG);
            in.set(JAVA_LONG, 0, value);
            check("cuMemPoolSetAttribute",
                    (int) memPoolSetAttribute.invokeExact(MemorySegment.ofAddress(pool), attribute, in));
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Reads a 64-bit attribute of a memory pool. */
    long memPoolAttribute(long pool, int attribute) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            check("cuMemPoolGetAttribute",
                    (int) memPoolGetAttribute.invokeExact(MemorySegment.ofAddress(pool), attribute, out));
            return out.get(JAVA_LONG, 0);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Minimum mapping granularity for plain device memory on {@code device} (2 MiB on current GPUs). */
    long allocationGranularity(int device) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            check("cuMemGetAllocationGranularity", (int) memGetAllocationGranularity.invokeExact(out,
                    allocationProp(arena, device), MEM_ALLOC_GRANULARITY_MINIMUM));
            return out.get(JAVA_LONG, 0);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Reserves {@code size} bytes of device virtual address space; returns its base. */
    long addressReserve(long size, long alignment) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            int result = (int) memAddressReserve.invokeExact(out, size, alignment, 0L, 0L);
            if (result == CUDA_ERROR_OUT_OF_MEMORY) {
                throw new OutOfDeviceMemoryException(size, "cuMemAddressReserve of " + size
                        + " bytes failed: CUDA_ERROR_OUT_OF_MEMORY (no address space left)",
                        new CudaDriverException("cuMemAddressReserve", result, null));
            }
            check("cuMemAddressReserve", result, size + " bytes");
            return out.get(JAVA_LONG, 0);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    void addressFree(long base, long size) {
        try {
            check("cuMemAddressFree", (int) memAddressFree.invokeExact(base, size),
                    size + " bytes at 0x" + Long.toHexString(base));
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /**
     * Creates {@code size} bytes of physical device memory on {@code device}; returns its handle.
     *
     * @throws OutOfDeviceMemoryException when the device has no room
     */
    long create(long size, int device) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            int result = (int) memCreate.invokeExact(out, size, allocationProp(arena, device), 0L);
            if (result == CUDA_ERROR_OUT_OF_MEMORY) {
                throw new OutOfDeviceMemoryException(size, "cuda:" + device + ": cuMemCreate of " + size
                        + " bytes failed: CUDA_ERROR_OUT_OF_MEMORY", new CudaDriverException("cuMemCreate", result, null));
            }
            check("cuMemCreate", result, size + " bytes on device " + device);
            return out.get(JAVA_LONG, 0);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    void release(long handle) {
        try {
            check("cuMemRelease", (int) memRelease.invokeExact(handle));
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Maps physical allocation {@code handle} at {@code address} and makes it readable and writable. */
    void mapReadWrite(long address, long size, long handle, int device) {
        try (Arena arena = Arena.ofConfined()) {
            check("cuMemMap", (int) memMap.invokeExact(address, size, 0L, handle, 0L));
            MemorySegment desc = arena.allocate(SCRATCH, 8).fill((byte) 0);
            desc.set(JAVA_INT, 0, MEM_LOCATION_TYPE_DEVICE);
            desc.set(JAVA_INT, 4, device);
            desc.set(JAVA_INT, 8, MEM_ACCESS_FLAGS_PROT_READWRITE);
            int result = (int) memSetAccess.invokeExact(address, size, desc, 1L);
            if (result != 0) {
                int ignored = (int) memUnmap.invokeExact(address, size);
                check("cuMemSetAccess", result);
            }
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** cuMemMap of the whole of physical allocation {@code handle} at {@code address}; no access is granted yet. */
    void map(long address, long size, long handle) {
        try {
            check("cuMemMap", (int) memMap.invokeExact(address, size, 0L, handle, 0L),
                    size + " bytes at 0x" + Long.toHexString(address));
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Makes {@code [address, address + size)}, all of it mapped (by one or several cuMemMap calls), read/write for {@code device}. */
    void setAccessReadWrite(long address, long size, int device) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment desc = arena.allocate(SCRATCH, 8).fill((byte) 0);
            desc.set(JAVA_INT, 0, MEM_LOCATION_TYPE_DEVICE);
            desc.set(JAVA_INT, 4, device);
            desc.set(JAVA_INT, 8, MEM_ACCESS_FLAGS_PROT_READWRITE);
            check("cuMemSetAccess", (int) memSetAccess.invokeExact(address, size, desc, 1L),
                    size + " bytes at 0x" + Long.toHexString(address));
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** cuMemUnmap without throwing: the raw CUresult, for callers that choose a fallback or roll back. */
    int tryUnmap(long address, long size) {
        try {
            return (int) memUnmap.invokeExact(address, size);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    void unmap(long address, long size) {
        try {
            check("cuMemUnmap", (int) memUnmap.invokeExact(address, size),
                    size + " bytes at 0x" + Long.toHexString(address));
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private static MemorySegment allocationProp(Arena arena, int device) {
        MemorySegment prop = arena.allocate(SCRATCH, 8).fill((byte) 0);
        prop.set(JAVA_INT, 0, MEM_ALLOCATION_TYPE_PINNED);
        prop.set(JAVA_INT, 4, 0);
        prop.set(JAVA_INT, 8, MEM_LOCATION_TYPE_DEVICE);
        prop.set(JAVA_INT, 12, device);
        prop.set(JAVA_BYTE, 24, (byte) 0);
        return prop;
    }

    private static void check(String call, int result) {
        Cu.check(call, result);
    }

    private static void check(String call, int result, String detail) {
        Cu.check(call, result, detail);
    }
}
