package io.gpupool.model.graph;

import io.gpupool.model.BatchPadding.Shape;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Which graph a request or a packed batch rounds up to, and which ones have none. */
class ShapeBucketsTest {

    private static final List<Integer> TOKENS = List.of(16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
            1536, 2048);
    private final ShapeBuckets buckets = new ShapeBuckets(List.of(1, 2, 4), List.of(16, 32, 64, 128), TOKENS);

    @Test
    void aPackedBatchRoundsItsTokensToTheNextBucketAndItsSequencesToThePowerOfTwoAtMostThat() {
        assertThat(buckets.packedBucket(new Shape(1, 5))).isEqualTo(new Shape(1, 16));
        assertThat(buckets.packedBucket(new Shape(3, 17))).isEqualTo(new Shape(4, 24));
        assertThat(buckets.packedBucket(new Shape(19, 500))).isEqualTo(new Shape(32, 512));
        assertThat(buckets.packedBucket(new Shape(19, 513))).isEqualTo(new Shape(32, 768));
        assertThat(buckets.packedBucket(new Shape(32, 768))).isEqualTo(new Shape(32, 768));
        assertThat(buckets.packedBucket(new Shape(33, 40))).as("sequences capped at the tokens")
                .isEqualTo(new Shape(48, 48));
        assertThat(buckets.packedBucket(new Shape(2048, 2048))).isEqualTo(new Shape(2048, 2048));
    }

    @Test
    void everyBatchWithinTheLargestBucketFitsItsBucketAndPadsAtMostHalfItsTokens() {
        for (int tokens = 1; tokens <= 2048; tokens++) {
            for (int sequences : new int[] {1, 2, 3, 7, 31, 64, 100, tokens / 2, tokens}) {
                if (sequences < 1 || sequences > tokens) {
                    continue;
                }
                Shape bucket = buckets.packedBucket(new Shape(sequences, tokens));
                assertThat(bucket.tokens()).isGreaterThanOrEqualTo(tokens);
                assertThat(bucket.sequences()).isBetween(sequences, bucket.tokens());
                if (tokens > 16) {
                    assertThat(bucket.tokens()).as("%d tokens", tokens).isLessThanOrEqualTo(tokens * 3 / 2);
                }
            }
        }
    }

    @Test
    void batchesBeyondTheLargestBucketOrWithoutTokenBucketsHaveNone() {
        assertThat(buckets.packedBucket(new Shape(3, 2049))).isNull();
        assertThat(buckets.packedBucket(new Shape(0, 0))).isNull();
        assertThat(new ShapeBuckets(List.of(1), List.of(16)).packedBucket(new Shape(1, 5))).isNull();
    }

    @Test
    void requestsKeepTheirOwnBuckets() {
        assertThat(buckets.batchBucket(3, 8)).isEqualTo(4);
        assertThat(buckets.sequenceBucket(17, 512)).isEqualTo(32);
        assertThat(buckets.sequenceBucket(129, 512)).isZero();
        assertThat(buckets.batchBucket(4, 2)).as("beyond the model's limit").isZero();
    }

    @Test
    void tokenBucketsMustAscend() {
        assertThatThrownBy(() -> new ShapeBuckets(List.of(1), List.of(16), List.of(64, 32)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("token-buckets");
    }
}
