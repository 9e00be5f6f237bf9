package io.gpupool.memory.source;

import java.util.BitSet;
import java.util.Map;
import java.util.TreeMap;

/**
 * The bookkeeping of a {@link io.gpupool.memory.ChunkSource} that reserves address space and maps it
 * in granules: which ranges are reserved and which granules of each are mapped. It makes the checks
 * every such source owes its caller, so that a pool bug fails loudly instead of corrupting counts:
 * addresses and sizes are positive multiples of the granule, a map or unmap lies inside one reserved
 * range, nothing is mapped twice, nothing unmapped that is not mapped, and no range is released while
 * granules of it are still mapped.
 *
 * <p>{@link #markMapped} and {@link #markUnmapped} check and flip the bits in one step, so a source
 * marks first and then does the real work, undoing the mark if that fails. One monitor guards all.
 */
public final class ReservedRanges {

    private record Range(long bytes, BitSet mapped) {
    }

    private final String owner;
    private final long granule;
    private final TreeMap<Long, Range> ranges = new TreeMap<>();

    /**
     * @param owner   the source's name, for messages
     * @param granule the mapping granularity in bytes (a power of two)
     */
    public ReservedRanges(String owner, long granule) {
        if (granule <= 0 || Long.bitCount(granule) != 1) {
            throw new IllegalArgumentException("granule = " + granule + " is invalid; allowed: a power of two");
        }
        this.owner = owner;
        this.granule = granule;
    }

    /** Throws unless {@code address} and {@code bytes} are multiples of the granule and {@code bytes} is positive. */
    public void requireGranules(String call, long address, long bytes) {
        if (bytes <= 0 || bytes % granule != 0 || address % granule != 0) {
            throw new IllegalArgumentException(owner + ": " + call + " of " + bytes + " bytes at 0x"
                    + Long.toHexString(address) + ": address and size must be positive multiples of "
                    + describe(granule));
        }
    }

    /** Records a newly reserved range [base, base + bytes). */
    public synchronized void add(long base, long bytes) {
        requireGranules("reserveAddressSpace", base, bytes);
        ranges.put(base, new Range(bytes, new BitSet((int) (bytes / granule))));
    }

    /** Forgets a reserved range before it is released; throws if it is unknown or still has mapped granules. */
    public synchronized void remove(long base, long bytes) {
        Range range = ranges.get(base);
        if (range == null || range.bytes() != bytes) {
            throw new IllegalArgumentException(owner + ": release of 0x" + Long.toHexString(base) + " (" + bytes
                    + " bytes) matches no reserved range");
        }
        if (!range.mapped().isEmpty()) {
            throw new IllegalStateException(owner + ": cannot release range 0x" + Long.toHexString(base) + ": "
                    + range.mapped().cardinality() + " granule(s) of " + describe(granule) + " are still mapped");
        }
        ranges.remove(base);
    }

    /** Marks [address, address + bytes) mapped; throws if it leaves one reserved range or a granule is mapped already. */
    public synchronized void markMapped(long address, long bytes) {
        Map.Entry<Long, Range> entry = rangeOf("map", address, bytes);
        int from = (int) ((address - entry.getKey()) / granule);
        int to = from + (int) (bytes / granule);
        BitSet mapped = entry.getValue().mapped();
        int already = mapped.nextSetBit(from);
        if (already >= 0 && already < to) {
            throw new IllegalStateException(owner + ": map of 0x" + Long.toHexString(address) + " (" + bytes
                    + " bytes): the granule at 0x" + Long.toHexString(entry.getKey() + already * granule)
                    + " is already mapped");
        }
        mapped.set(from, to);
    }

    /** Marks [address, address + bytes) unmapped; throws if it leaves one reserved range or a granule is not mapped. */
    public synchronized void markUnmapped(long address, long bytes) {
        Map.Entry<Long, Range> entry = rangeOf("unmap", address, bytes);
        int from = (int) ((address - entry.getKey()) / granule);
        int to = from + (int) (bytes / granule);
        BitSet mapped = entry.getValue().mapped();
        int hole = mapped.nextClearBit(from);
        if (hole < to) {
            throw new IllegalStateException(owner + ": unmap of 0x" + Long.toHexString(address) + " (" + bytes
                    + " bytes): the granule at 0x" + Long.toHexString(entry.getKey() + hole * granule)
                    + " is not mapped");
        }
        mapped.clear(from, to);
    }

    /** Reserved ranges now. */
    public synchronized int count() {
        return ranges.size();
    }

    private Map.Entry<Long, Range> rangeOf(String call, long address, long bytes) {
        requireGranules(call, address, bytes);
        Map.Entry<Long, Range> entry = ranges.floorEntry(address);
        if (entry == null || address + bytes > entry.getKey() + entry.getValue().bytes()) {
            throw new IllegalArgumentException(owner + ": " + call + " of 0x" + Long.toHexString(address) + " (" + bytes
                    + " bytes) is not inside one reserved range");
        }
        return entry;
    }

    private static String describe(long bytes) {
        return bytes % (1L << 20) == 0 ? (bytes >> 20) + " MiB" : bytes + " bytes";
    }
}
