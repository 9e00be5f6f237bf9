package io.gpupool.actuate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

import io.gpupool.memory.PoolConfig;
import io.gpupool.memory.PoolTuning;
import io.gpupool.memory.ReclaimOrder;
import org.junit.jupiter.api.Test;

class TuningRequestTest {

    static final long MIB = 1L << 20;

    private static Map<String, String> fields(String... pairs) {
        Map<String, String> map = new HashMap<>();
        for (int i = 0; i < pairs.length; i += 2) {
            map.put(pairs[i], pairs[i + 1]);
        }
        return map;
    }

    @Test
    void sizesAndDurationsAcceptUnitsAndPlainNumbers() {
        PoolTuning tuning = TuningRequest.parse(fields("localCacheBytesPerStream", "128MB", "growthStepBytes",
                "536870912", "releaseIdleAge", "90s", "localIdleAge", "PT2S", "capFraction", "0.75",
                "coalesceThreshold", "40"));
        assertThat(tuning.localCacheBytesPerStream()).isEqualTo(128 * MIB);
        assertThat(tuning.growthStepBytes()).isEqualTo(512 * MIB);
        assertThat(tuning.releaseIdleAge()).isEqualTo(Duration.ofSeconds(90));
        assertThat(tuning.localIdleAge()).isEqualTo(Duration.ofSeconds(2));
        assertThat(tuning.capFraction()).isEqualTo(0.75);
        assertThat(tuning.capBytes()).isZero(); // a fraction switches the byte cap off
        assertThat(tuning.coalesceThreshold()).isEqualTo(40);
        assertThat(tuning.localCacheCountPerClass()).isNull();
    }

    @Test
    void budgetReclaimIsOneOfItsConstantsInAnyCase() {
        assertThat(PoolConfig.defaults().apply(TuningRequest.parse(fields("budgetReclaim", "periodic")))
                .budgetReclaim()).isEqualTo(io.gpupool.memory.BudgetReclaim.PERIODIC);
        assertThatThrownBy(() -> TuningRequest.parse(fields("budgetReclaim", "sometimes")))
                .isInstanceOf(TuningException.class).hasMessageContaining("budgetReclaim")
                .hasMessageContaining("ON_MAP").hasMessageContaining("PERIODIC");
    }

    @Test
    void waitBeyondBudgetIsTrueOrFalse() {
        assertThat(PoolConfig.defaults().apply(TuningRequest.parse(fields("waitBeyondBudget", "TRUE")))
                .waitBeyondBudget()).isTrue();
        assertThat(PoolConfig.defaults().withWaitBeyondBudget(true)
                .apply(TuningRequest.parse(fields("waitBeyondBudget", "false"))).waitBeyondBudget()).isFalse();
        assertThatThrownBy(() -> TuningRequest.parse(fields("waitBeyondBudget", "yes")))
                .isInstanceOf(TuningException.class).hasMessageContaining("waitBeyondBudget")
                .hasMessageContaining("true or false");
    }

    @Test
    void theReclaimOrderIsOneOfItsConstantsInAnyCase() {
        PoolConfig tuned = PoolConfig.defaults().apply(TuningRequest.parse(
                fields("reclaimOrder", "coldest_in_order", "reclaimHysteresis", "0")));
        assertThat(tuned.reclaimOrder()).isEqualTo(ReclaimOrder.COLDEST_IN_ORDER);
        assertThat(tuned.reclaimHysteresis()).isZero();
        assertThatThrownBy(() -> TuningRequest.parse(fields("reclaimOrder", "oldest")))
                .isInstanceOf(TuningException.class).hasMessageContaining("reclaimOrder")
                .hasMessageContaining("[HIGHEST_ADDRESS, COLDEST_IN_ORDER, SMALL_CHUNKS_FIRST]");
    }

    @Test
    void theMappedSlackIsANumberAndThePoolChecksItsRange() {
        PoolTuning tuning = TuningRequest.parse(fields("mappedSlack", "0.25"));
        assertThat(PoolConfig.defaults().apply(tuning).mappedSlack()).isEqualTo(0.25);
        assertThatThrownBy(() -> TuningRequest.parse(fields("mappedSlack", "a lot")))
                .isInstanceOf(TuningException.class).hasMessageContaining("mappedSlack")
                .hasMessageContaining("a decimal number");
        assertThatThrownBy(() -> PoolConfig.defaults().apply(TuningRequest.parse(fields("mappedSlack", "-0.5"))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("gpupool.memory.mappedSlack = -0.5 is invalid; allowed: [0, 1]");
    }

    @Test
    void blankFieldsAreLeftUnchanged() {
        PoolTuning tuning = TuningRequest.parse(fields("coalesceThreshold", "5", "capBytes", " "));
        assertThat(tuning.capBytes()).isNull();
        assertThat(PoolConfig.defaults().apply(tuning).capFraction()).isEqualTo(0.9);
    }

    @Test
    void unparseableTextNamesTheFieldAndWhatIsExpected() {
        assertThatThrownBy(() -> TuningRequest.parse(fields("coalesceThreshold", "ten")))
                .isInstanceOfSatisfying(TuningException.class, e -> {
                    assertThat(e.field()).isEqualTo("coalesceThreshold");
                    assertThat(e.value()).isEqualTo("ten");
                    assertThat(e.allowed()).isEqualTo("an integer");
                });
        assertThatThrownBy(() -> TuningRequest.parse(fields("growthStepBytes", "big")))
                .isInstanceOfSatisfying(TuningException.class, e -> assertThat(e.field()).isEqualTo("growthStepBytes"));
    }

    @Test
    void theFieldsArePoolTuningsComponentsSoEveryKnobCanBeSentByItsName() {
        assertThat(TuningRequest.FIELDS).containsExactly(java.util.Arrays.stream(PoolTuning.class.getRecordComponents())
                .map(java.lang.reflect.RecordComponent::getName).toArray(String[]::new));
        for (String field : TuningRequest.FIELDS) {
            assertThat(PoolConfig.class.getRecordComponents()).as("PoolConfig has the component %s", field)
                    .anySatisfy(c -> assertThat(c.getName()).isEqualTo(field));
        }
    }

    @Test
    void unknownFieldsAreRefusedAllByName() {
        assertThatThrownBy(() -> TuningRequest.parse(fields("bogus", "1", "coalesceThreshold", "5", "capfraction", "0.5")))
                .isInstanceOfSatisfying(TuningException.class, e -> {
                    assertThat(e.field()).isEqualTo("bogus, capfraction");
                    assertThat(e).hasMessageStartingWith("unknown tuning fields bogus, capfraction; allowed: ")
                            .hasMessageContaining("capFraction");
                });
        assertThatThrownBy(() -> TuningRequest.parse(fields("bogus", "1")))
                .hasMessageStartingWith("unknown tuning field bogus;");
    }

    @Test
    void numbersAreDecimalsAsJsonWritesThemNotJavaLiterals() {
        for (String text : new String[] {"0.5d", "0x1p-3", "0.5f", "NaN", "Infinity", "1/2"}) {
            assertThatThrownBy(() -> TuningRequest.parse(fields("capFraction", text))).as(text)
                    .isInstanceOfSatisfying(TuningException.class, e -> {
                        assertThat(e.field()).isEqualTo("capFraction");
                        assertThat(e.value()).isEqualTo(text);
                    });
            assertThatThrownBy(() -> TuningRequest.parse(fields("mappedSlack", text))).as(text)
                    .isInstanceOf(TuningException.class);
        }
        assertThatThrownBy(() -> TuningRequest.parse(fields("capFraction", "1e999")))
                .isInstanceOfSatisfying(TuningException.class, e -> {
                    assertThat(e.value()).isEqualTo("1e999"); // as sent, not the "Infinity" it would parse to
                    assertThat(e.allowed()).contains("within the range of a double");
                });
        assertThat(TuningRequest.parse(Map.of("capFraction", 1.0E-3)).capFraction()).isEqualTo(0.001);
        assertThat(TuningRequest.parse(fields("mappedSlack", ".25")).mappedSlack()).isEqualTo(0.25);
        assertThat(TuningRequest.parse(Map.of("coalesceThreshold", 7, "waitBeyondBudget", true)))
                .isEqualTo(PoolTuning.builder().coalesceThreshold(7).waitBeyondBudget(true).build());
    }

    @Test
    void anEmptyRequestListsTheFieldsThatCanBeTuned() {
        assertThatThrownBy(() -> TuningRequest.parse(fields()))
                .isInstanceOf(TuningException.class)
                .hasMessageContaining("coalesceThreshold").hasMessageContaining("capFraction");
    }

    @Test
    void thePoolsOwnRejectionIsTurnedIntoFieldValueAndRange() {
        IllegalArgumentException fromPool = new IllegalArgumentException("gpupool.memory.capFraction = 1.5 is invalid; allowed: (0, 1]");
        TuningException e = TuningException.fromPool(fromPool);
        assertThat(e.field()).isEqualTo("capFraction");
        assertThat(e.value()).isEqualTo("1.5");
        assertThat(e.allowed()).isEqualTo("(0, 1]");
        assertThat(e).hasMessage(fromPool.getMessage());

        TuningException other = TuningException.fromPool(new IllegalArgumentException("something else"));
        assertThat(other.field()).isNull();
        assertThat(other).hasMessage("something else");
    }

    @Test
    void theRealConfigurationRejectsWhatTheEndpointPassesThrough() {
        PoolTuning tuning = TuningRequest.parse(fields("localCacheCountPerClass", "65"));
        assertThatThrownBy(() -> PoolConfig.defaults().apply(tuning))
                .satisfies(ex -> assertThat(TuningException.fromPool((IllegalArgumentException) ex).field())
                        .isEqualTo("localCacheCountPerClass"));
    }
}
