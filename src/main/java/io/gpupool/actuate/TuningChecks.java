package io.gpupool.actuate;

import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;

/**
 * What a tuning must satisfy beyond {@link PoolConfig}'s own checks, judged against the running pool, so
 * that the 400 names the field the operator sent:
 * <ol>
 *   <li>A cap given as {@code capFraction} resolves, against the device's memory, to at least one
 *       minimum block: the bound {@code capBytes} already has. A smaller cap would make every
 *       allocation fail.</li>
 *   <li>{@code maxGrowthStepBytes} alone may not fall below the growth step in force. The pool would
 *       reject the pair in the name of {@code growthStepBytes}, a field the operator did not send.</li>
 *   <li>{@code capBytes} may not exceed the device's memory: such a cap caps nothing, and an operator who
 *       typed {@code 1TB} for {@code 1GB} should hear so rather than find the pool uncapped; and it does not
 *       come with a {@code capFraction}, which it would hide.</li>
 * </ol>
 */
final class TuningChecks {

    private TuningChecks() {
    }

    /** @throws TuningException naming the sent field that breaks a rule above */
    static void beforeApplying(PoolConfig current, PoolTuning tuning, long capacityBytes) {
        Long maxStep = tuning.maxGrowthStepBytes();
        if (maxStep != null && tuning.growthStepBytes() == null && maxStep < current.growthStepBytes()) {
            throw new TuningException("maxGrowthStepBytes", maxStep,
                    "at least growthStepBytes (" + current.growthStepBytes() + ")");
        }
        Long cap = tuning.capBytes();
        if (cap != null && capacityBytes > 0 && cap > capacityBytes) {
            throw new TuningException("capBytes", cap, "at most the device's " + capacityBytes
                    + " bytes (0: the fraction capFraction of them)");
        }
        Double fraction = tuning.capFraction();
        if (fraction != null && cap != null && cap != 0) {
            throw new TuningException("capFraction", fraction, "not together with a capBytes other than 0 (a cap in "
                    + "bytes hides the fraction); send one of them");
        }
        if (fraction != null) {
            PoolConfig tuned = current.apply(tuning);
            if (tuned.capBytes() == 0 && tuned.effectiveCapBytes(capacityBytes) < tuned.minBlockBytes()) {
                double least = (double) tuned.minBlockBytes() / capacityBytes;
                throw new TuningException("capFraction", fraction, "(0, 1], and a cap of at least minBlockBytes ("
                        + tuned.minBlockBytes() + ") of the device's " + capacityBytes + " bytes: at least " + least);
            }
        }
    }
}
