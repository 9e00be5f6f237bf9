package io.gpupool.backend.host;

import io.gpupool.memory.OutOfDeviceMemoryException;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.Locale;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The four C library calls behind the host backend's address-space mapping, bound through FFM:
 * {@code mmap} reserves a range with no access ({@code PROT_NONE}, {@code MAP_NORESERVE}: it costs no
 * memory), {@code mprotect} makes part of it readable and writable (pages are committed on first
 * touch), {@code madvise(MADV_DONTNEED)} drops the pages of an unmapped part and {@code mprotect}
 * makes it inaccessible again, {@code munmap} gives the range back.
 *
 * <p>Linux only (the flag values are Linux's, x86-64 and aarch64 alike); {@link #load()} returns null
 * elsewhere or when the symbols are missing, and the host chunk source then does not map.
 */
final class HostVirtualMemory {

    private static final int PROT_NONE = 0;
    private static final int PROT_READ_WRITE = 0x1 | 0x2;
    private static final int MAP_PRIVATE = 0x02;
    private static final int MAP_ANONYMOUS = 0x20;
    private static final int MAP_NORESERVE = 0x4000;
    private static final int MADV_DONTNEED = 4;
    private static final long MAP_FAILED = -1L;

    private final MethodHandle mmap;
    private final MethodHandle munmap;
    private final MethodHandle mprotect;
    private final MethodHandle madvise;

    private HostVirtualMemory(Linker linker) {
        var libc = linker.defaultLookup();
        mmap = linker.downcallHandle(libc.find("mmap").orElseThrow(),
                FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
        munmap = linker.downcallHandle(libc.find("munmap").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));
        mprotect = linker.downcallHandle(libc.find("mprotect").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
        madvise = linker.downcallHandle(libc.find("madvise").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    }

    /** The bindings, or null where they cannot work (not Linux, symbols missing, native access refused). */
    static HostVirtualMemory load() {
        if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
            return null;
        }
        try {
            return new HostVirtualMemory(Linker.nativeLinker());
        } catch (RuntimeException | LinkageError e) {
            return null;
        }
    }

    /** Reserves {@code bytes} of inaccessible address space aligned to {@code alignment} (a power of two). */
    long reserve(long bytes, long alignment, String who) {
        long padded = bytes + alignment;                       // over-reserve, then trim to an aligned start
        long base = call(mmap, "mmap", MemorySegment.NULL, padded, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0L);
        if (base == MAP_FAILED || base == 0) {
            throw new OutOfDeviceMemoryException(bytes, who + ": mmap could not reserve " + bytes + " bytes of address space");
        }
        long start = (base + alignment - 1) & -alignment;
        if (start > base) {
            check(munmapRaw(base, start - base), "munmap", who);
        }
        long end = start + bytes;
        long tail = base + padded - end;
        if (tail > 0) {
            check(munmapRaw(end, tail), "munmap", who);
        }
        return start;
    }

    void release(long address, long bytes, String who) {
        check(munmapRaw(address, bytes), "munmap", who);
    }

    /** Makes the range readable and writable; its pages are committed as they are first touched. */
    void commit(long address, long bytes, String who) {
        check((int) call(mprotect, "mprotect", MemorySegment.ofAddress(address), bytes, PROT_READ_WRITE), "mprotect", who);
    }

    /** Drops the range's pages (their memory goes back to the system) and makes it inaccessible. */
    void decommit(long address, long bytes, String who) {
        check((int) call(madvise, "madvise", MemorySegment.ofAddress(address), bytes, MADV_DONTNEED), "madvise", who);
        check((int) call(mprotect, "mprotect", MemorySegment.ofAddress(address), bytes, PROT_NONE), "mprotect", who);
    }

    private int munmapRaw(long address, long bytes) {
        return (int) call(munmap, "munmap", MemorySegment.ofAddress(address), bytes);
    }

    private static void check(int result, String call, String who) {
        if (result != 0) {
            throw new IllegalStateException(who + ": " + call + " failed (returned " + result + ")");
        }
    }

    private static long call(MethodHandle handle, String name, Object... args) {
        try {
            Object result = handle.invokeWithArguments(args);
            return result instanceof MemorySegment segment ? segment.address() : ((Number) result).longValue();
        } catch (Throwable t) {
            throw new IllegalStateException(name + " could not be called: " + t, t);
        }
    }
}
