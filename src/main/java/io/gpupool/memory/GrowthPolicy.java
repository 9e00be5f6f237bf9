package io.gpupool.memory;

/** How the global level obtains chunks from its {@link ChunkSource}. */
public enum GrowthPolicy {
    /** Reserve {@link PoolConfig#initialBytes()} at construction and never grow the buddy level afterwards. */
    EAGER,
    /** Start empty; grow on demand with chunks of growth step, doubling up to the largest step, within the cap. */
    LAZY,
    /** Reserve {@link PoolConfig#initialBytes()} at construction, then grow like {@link #LAZY}. */
    HYBRID
}
