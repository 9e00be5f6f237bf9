package io.gpupool.actuate;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import io.gpupool.actuate.security.LoginThrottle;
import io.gpupool.actuate.security.OperatorCredential;
import org.junit.jupiter.api.Test;

/** The waits a guessing client gets, and the operator credential's comparison. */
class LoginThrottleTest {

    final AtomicLong now = new AtomicLong(1_000_000_000L);
    final LoginThrottle throttle = new LoginThrottle(3, Duration.ofSeconds(1), Duration.ofSeconds(8), 2, now::get);

    @Test
    void freeFailuresThenAWaitThatDoublesUpToTheMaximum() {
        assertThat(throttle.failed("a").blocked()).isZero();
        assertThat(throttle.failed("a").blocked()).isZero();
        assertThat(throttle.failed("a").blocked()).isEqualTo(Duration.ofSeconds(1));
        assertThat(throttle.remainingBlock("a")).isEqualTo(Duration.ofSeconds(1));
        assertThat(throttle.remainingBlock("b")).as("other clients are not affected").isZero();
        now.addAndGet(Duration.ofSeconds(1).toNanos());
        assertThat(throttle.remainingBlock("a")).isZero();
        assertThat(throttle.failed("a").blocked()).isEqualTo(Duration.ofSeconds(2));
        assertThat(throttle.failed("a").blocked()).isEqualTo(Duration.ofSeconds(4));
        assertThat(throttle.failed("a").blocked()).isEqualTo(Duration.ofSeconds(8));
        assertThat(throttle.failed("a").blocked()).isEqualTo(Duration.ofSeconds(8));
        throttle.succeeded("a");
        assertThat(throttle.remainingBlock("a")).isZero();
        assertThat(throttle.failed("a").inARow()).isEqualTo(1);
    }

    @Test
    void aClientIsForgottenAfterTheMaximumWithoutAFailure() {
        for (int i = 0; i < 3; i++) {
            throttle.failed("a");
        }
        now.addAndGet(Duration.ofSeconds(9).toNanos());
        assertThat(throttle.remainingBlock("a")).isZero();
        assertThat(throttle.failed("a").inARow()).isEqualTo(1);
    }

    @Test
    void theTableIsBoundedDroppingTheLeastRecentlyFailedClient() {
        throttle.failed("a");
        throttle.failed("b");
        throttle.failed("c");
        assertThat(throttle.size()).isEqualTo(2);
        assertThat(throttle.failed("a").inARow()).as("a was dropped").isEqualTo(1);
    }

    @Test
    void theCredentialMatchesOnlyBothTogether() {
        OperatorCredential credential = new OperatorCredential("operator", "correct horse");
        assertThat(credential.matches("operator", "correct horse")).isTrue();
        assertThat(credential.matches("operator", "correct hors")).isFalse();
        assertThat(credential.matches("nobody", "correct horse")).isFalse();
        assertThat(credential.matches(null, null)).isFalse();
    }
}
