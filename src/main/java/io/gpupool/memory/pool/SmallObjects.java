package io.gpupool.memory.pool;

import io.gpupool.memory.AllocationStream;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

/**
 * The shared level of the small-object cache: for each {@link SizeClasses size class}, slabs
 * carved into equal objects, tracked by a bitmap.
 *
 * <h2>Layout</h2>
 * <pre>
 *   slab = buddy run of slabBlocks(c) minimum blocks, address aligned to the minimum block
 *   | obj 0 | obj 1 | obj 2 | ... | obj n-1 | tail |      n = slab bytes / size(c)
 *   bitmap: bit i set = object i is outside the slab (handed out or in a local cache)
 * </pre>
 * <h2>Handle of an object</h2>
 * Kind small: bits 32..61 slab id, bits 8..31 object index, bits 0..7 class index ({@link Handles}).
 *
 * <h2>Steps</h2>
 * <ol>
 *   <li>Take (batch of up to m objects for a local refill): lock the class; from the most recently
 *       used slab with free objects whose fences hold no unfinished work of another stream (among
 *       the last {@value #CLEAR_SCAN} with room; none such: the most recently used one), find clear
 *       bits (word scan from a hint); make the taking stream wait on the slab's fences; unlock. No slab has room: the caller obtains a new slab run from
 *       the buddy level outside the class lock and {@link #addSlab adds} it.</li>
 *   <li>Give back: lock the class, clear the bit, record the freeing stream's fence on the slab. A
 *       slab that becomes empty while the class has another slab with room leaves the class; its
 *       fences move to the chunk and its run goes back to the buddy level, outside the class lock.</li>
 * </ol>
 * One lock per class ({@link ShortLock}): streams contend only when they miss their local cache on the same class at
 * the same instant.
 */
final class SmallObjects {

    /** How many slabs with room a take inspects for one without another stream's pending fence. */
    static final int CLEAR_SCAN = 8;

    static final class Slab {
        final int id;
        final int sizeClass;
        final long runHandle;
        final long address;
        final int capacity;
        final long[] bitmap;
        final FenceSet fences = new FenceSet();
        int used;
        int hint;
        /** Position in the class's list of slabs with room, or -1. */
        int roomIndex = -1;
        boolean detached;

        Slab(int id, int sizeClass, long runHandle, long address, int capacity) {
            this.id = id;
            this.sizeClass = sizeClass;
            this.runHandle = runHandle;
            this.address = address;
            this.capacity = capacity;
            this.bitmap = new long[(capacity + 63) >>> 6];
            int tail = bitmap.length * 64 - capacity;
            if (tail > 0) {
                bitmap[bitmap.length - 1] = -1L << (64 - tail);   // bits past the capacity stay "used"
            }
        }
    }

    private static final class ClassArena {
        private static final VarHandle SLABS;
        private static final VarHandle LIVE;
        private static final VarHandle FREE;

        static {
            try {
                MethodHandles.Lookup lookup = MethodHandles.lookup();
                SLABS = lookup.findVarHandle(ClassArena.class, "slabs", long.class);
                LIVE = lookup.findVarHandle(ClassArena.class, "live", long.class);
                FREE = lookup.findVarHandle(ClassArena.class, "free", long.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        final ShortLock lock = new ShortLock();
        Slab[] withRoom = new Slab[4];
        int roomCount;
        /*
         * Slabs, objects handed out and objects free in them, for metrics: written under the lock with opaque
         * stores (atomic, but no store-load fence, which a volatile store costs on every take and give-back) and
         * read without it with opaque loads, so a reading may be a moment old.
         */
        private long slabs;
        private long live;
        private long free;

        void add(long slabDelta, long liveDelta, long freeDelta) {
            if (slabDelta != 0) {
                SLABS.setOpaque(this, slabs + slabDelta);
            }
            if (liveDelta != 0) {
                LIVE.setOpaque(this, live + liveDelta);
            }
            FREE.setOpaque(this, free + freeDelta);
        }

        long slabs() {
            return (long) SLABS.getOpaque(this);
        }

        long live() {
            return (long) LIVE.getOpaque(this);
        }

        long free() {
            return (long) FREE.getOpaque(this);
        }
    }

    private final SizeClasses classes;
    private final ClassArena[] arenas;
    /** Device-side waits on other streams' fences inserted when objects were taken. */
    final LongAdder crossStreamWaits = new LongAdder();
    private volatile Slab[] slabTable = new Slab[16];
    private final Object slabTableLock = new Object();

    SmallObjects(SizeClasses classes) {
        this.classes = classes;
        this.arenas = new ClassArena[classes.count()];
        for (int i = 0; i < arenas.length; i++) {
            arenas[i] = new ClassArena();
        }
    }

    long address(long handle) {
        Slab slab = slabTable[Handles.slabId(handle)];
        return slab.address + Handles.objectIndex(handle) * classes.size(slab.sizeClass);
    }

    /**
     * Takes up to {@code max} objects of class {@code c} into {@code out} from existing slabs.
     *
     * @return how many were taken (0: no slab has room)
     */
    int take(int c, long[] out, int outFrom, int max, AllocationStream taker) {
        ClassArena arena = arenas[c];
        arena.lock.lock();
        try {
            int n = 0;
            while (n < max && arena.roomCount > 0) {
                Slab slab = preferClear(arena, taker);
                int waits = slab.fences.makeWait(taker);
                if (waits > 0) {
                    crossStreamWaits.add(waits);                   // an adder's add is an atomic even for 0
                }
                while (n < max && slab.used < slab.capacity) {
                    int index = claim(slab);
                    out[outFrom + n++] = Handles.small(slab.id, index, c);
                }
                if (slab.used == slab.capacity) {
                    removeRoom(arena, slab);
                }
            }
            arena.add(0, n, -n);
            return n;
        } finally {
            arena.lock.unlock();
        }
    }

    private static int claim(Slab slab) {
        long[] bitmap = slab.bitmap;
        for (int w = slab.hint, scanned = 0; scanned < bitmap.length; scanned++, w = w + 1 == bitmap.length ? 0 : w + 1) {
            long word = bitmap[w];
            if (word != -1L) {
                int bit = Long.numberOfTrailingZeros(~word);
                bitmap[w] = word | (1L << bit);
                slab.hint = w;
                slab.used++;
                return (w << 6) + bit;
            }
        }
        throw new IllegalStateException("slab " + slab.id + " reported room but its bitmap is full");
    }

    /**
     * Registers a fresh slab carved from buddy run {@code runHandle} at {@code address}; the slab
     * takes over {@code runFences}, the pending fences of the run's units, so every later taker
     * waits for them too.
     */
    void addSlab(int c, long runHandle, long address, FenceSet runFences) {
        Slab slab;
        synchronized (slabTableLock) {
            Slab[] table = slabTable;
            int id = 0;
            while (id < table.length && table[id] != null) {
                id++;
            }
            if (id >= table.length) {
                table = Arrays.copyOf(table, table.length * 2);
            } else {
                table = table.clone();
            }
            slab = new Slab(id, c, runHandle, address, classes.objectsPerSlab(c));
            slab.fences.absorb(runFences);
            table[id] = slab;
            slabTable = table;
        }
        ClassArena arena = arenas[c];
        arena.lock.lock();
        try {
            addRoom(arena, slab);
            arena.add(1, 0, slab.capacity);
        } finally {
            arena.lock.unlock();
        }
    }

    /**
     * Returns objects; a slab that became empty while its class has another slab with room (or every
     * empty slab when {@code releaseAll}) is detached and its run handle stored in {@code released}.
     *
     * @param fence the freeing stream's fence, recorded on each touched slab; may be null
     */
    void giveBack(long[] handles, int from, int to, FenceSet.Shared fence, List<Slab> released) {
        for (int i = from; i < to; i++) {
            long h = handles[i];
            int c = Handles.sizeClass(h);
            Slab slab = slabTable[Handles.slabId(h)];
            int index = (int) Handles.objectIndex(h);
            ClassArena arena = arenas[c];
            arena.lock.lock();
            try {
                long mask = 1L << (index & 63);
                long word = slab.bitmap[index >>> 6];
                if ((word & mask) == 0) {
                    throw new IllegalStateException("small object " + Long.toHexString(h) + " freed twice");
                }
                slab.bitmap[index >>> 6] = word & ~mask;
                slab.used--;
                arena.add(0, -1, 1);
                if (fence != null) {
                    slab.fences.add(fence);
                }
                if (slab.roomIndex < 0) {
                    addRoom(arena, slab);
                }
                if (slab.used == 0 && arena.roomCount > 1) {
                    detach(arena, slab);
                    released.add(slab);
                }
            } finally {
                arena.lock.unlock();
            }
        }
    }

    /** Detaches every empty slab (trim and recovery). */
    void releaseEmpty(List<Slab> released) {
        for (ClassArena arena : arenas) {
            arena.lock.lock();
            try {
                for (int i = arena.roomCount - 1; i >= 0; i--) {
                    Slab slab = arena.withRoom[i];
                    if (slab.used == 0) {
                        detach(arena, slab);
                        released.add(slab);
                    }
                }
            } finally {
                arena.lock.unlock();
            }
        }
    }

    private void detach(ClassArena arena, Slab slab) {
        removeRoom(arena, slab);
        arena.add(-1, 0, -slab.capacity);
        slab.detached = true;
        synchronized (slabTableLock) {
            Slab[] table = slabTable.clone();
            table[slab.id] = null;
            slabTable = table;
        }
    }

    private static void addRoom(ClassArena arena, Slab slab) {
        if (arena.roomCount == arena.withRoom.length) {
            arena.withRoom = Arrays.copyOf(arena.withRoom, arena.roomCount * 2);
        }
        slab.roomIndex = arena.roomCount;
        arena.withRoom[arena.roomCount++] = slab;
    }

    /**
     * The most recently used slab with room whose fences would not make {@code taker} wait on
     * another stream, among the last {@value #CLEAR_SCAN} with room; else the most recent one.
     */
    private static Slab preferClear(ClassArena arena, AllocationStream taker) {
        int last = arena.roomCount - 1;
        for (int i = last; i >= 0 && i > last - CLEAR_SCAN; i--) {
            Slab slab = arena.withRoom[i];
            if (!slab.fences.blocks(taker)) {
                return slab;
            }
        }
        return arena.withRoom[last];
    }

    private static void removeRoom(ClassArena arena, Slab slab) {
        int i = slab.roomIndex;
        Slab last = arena.withRoom[--arena.roomCount];
        arena.withRoom[i] = last;
        last.roomIndex = i;
        arena.withRoom[arena.roomCount] = null;
        slab.roomIndex = -1;
    }

    /** Calls {@code sink} with (address, size) of every object still taken, plus the slab runs (leak reports). */
    void forEachTaken(java.util.function.BiConsumer<Long, Long> objects, java.util.function.LongConsumer slabRuns) {
        for (Slab slab : slabTable) {
            if (slab == null) {
                continue;
            }
            slabRuns.accept(slab.runHandle);
            long size = classes.size(slab.sizeClass);
            ClassArena arena = arenas[slab.sizeClass];
            arena.lock.lock();
            try {
                for (int i = 0; i < slab.capacity; i++) {
                    if ((slab.bitmap[i >>> 6] & (1L << (i & 63))) != 0) {
                        objects.accept(slab.address + i * size, size);
                    }
                }
            } finally {
                arena.lock.unlock();
            }
        }
    }

    /** Per-class statistics, read without locks. */
    List<io.gpupool.memory.metric.SizeClassMetric> metrics(long minBlockBytes) {
        List<io.gpupool.memory.metric.SizeClassMetric> result = new ArrayList<>();
        for (int c = 0; c < arenas.length; c++) {
            ClassArena arena = arenas[c];
            long slabs = arena.slabs();
            long live = arena.live();
            if (slabs != 0 || live != 0) {
                result.add(new io.gpupool.memory.metric.SizeClassMetric(c, classes.size(c),
                        classes.slabBlocks(c) * minBlockBytes, slabs, live, arena.free()));
            }
        }
        return result;
    }

    /** Passes the buddy-run handle of every slab in use to {@code action} (copy-on-write table, no lock). */
    void forEachSlabRun(java.util.function.LongConsumer action) {
        for (Slab slab : slabTable) {
            if (slab != null && !slab.detached) {
                action.accept(slab.runHandle);
            }
        }
    }
}
