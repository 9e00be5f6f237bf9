package io.gpupool.serving;

import io.gpupool.memory.OutOfDeviceMemoryException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Operators;
import org.reactivestreams.Publisher;
import org.reactivestreams.Subscriber;

import java.time.Duration;

import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;

/** A failure signalled after the client's subscription was cancelled: what the log shows. */
@ExtendWith(OutputCaptureExtension.class)
class UndeliveredFailuresTest {

    /** As a request's answer behind its timeout: the client cancels, then the work under way fails. */
    private static void failAfterCancel(Throwable failure) {
        AtomicReference<Subscriber<? super String>> work = new AtomicReference<>();
        Publisher<String> underWay = subscriber -> {
            subscriber.onSubscribe(Operators.emptySubscription());
            work.set(subscriber);
        };
        Disposable answer = Mono.fromDirect(underWay).timeout(Duration.ofSeconds(30)).subscribe();
        answer.dispose();
        work.get().onError(failure);
    }

    @Test
    void anAnswerTheServerGivesOnPurposeIsNoErrorLineAndAnUnexpectedFailureIsAWarningWithItsTrace(CapturedOutput output) {
        UndeliveredFailures.install();
        assertThat(UndeliveredFailures.install()).as("installed once").isFalse();

        failAfterCancel(ServingException.beingUnloaded("iris-mlp"));
        failAfterCancel(new OutOfDeviceMemoryException(1 << 20, "pool exhausted"));
        assertThat(output.getAll()).doesNotContain("onErrorDropped").doesNotContain(" ERROR ")
                .doesNotContain("is being unloaded");

        failAfterCancel(new IllegalStateException("a fault nobody saw"));
        assertThat(output.getAll()).contains(" WARN ").contains("after its client went away")
                .contains("IllegalStateException: a fault nobody saw").doesNotContain(" ERROR ");
    }
}
