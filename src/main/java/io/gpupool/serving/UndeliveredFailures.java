package io.gpupool.serving;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Hooks;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * What happens to a failure that arrives after its client went away. A request's answer is a reactive chain;
 * when the client closes or resets its connection, the chain is cancelled, and a failure raised at that moment by
 * work already under way (a model that began unloading, a device queue that closed) has no subscriber left.
 * Reactor hands such a failure to its "dropped error" hook, which by default logs it at ERROR with
 * "Operator called default onErrorDropped": under clients that come and go during an unload, dozens of ERROR
 * lines a second for answers nobody could receive.
 *
 * <p>The hook this class installs logs what would have been an answer the server gives on purpose (a
 * {@link ServingException}, a 507) at DEBUG, and anything else, which would have been a 500, at WARN with its
 * stack trace: it is still a fault worth finding, only no client saw it.
 *
 * <p>Reactor's hook is one per JVM and composes each consumer added; this one is added once, whatever number
 * of application contexts start.
 */
public final class UndeliveredFailures {

    private static final Logger log = LoggerFactory.getLogger(UndeliveredFailures.class);
    private static final AtomicBoolean INSTALLED = new AtomicBoolean();

    private UndeliveredFailures() {
    }

    /** Installs the hook (once per JVM); returns whether this call did. */
    public static boolean install() {
        if (!INSTALLED.compareAndSet(false, true)) {
            return false;
        }
        Hooks.onErrorDropped(UndeliveredFailures::dropped);
        return true;
    }

    static void dropped(Throwable failure) {
        int status = ErrorStatus.of(failure);
        if (status != 500 || ErrorStatus.clientWentAway(failure)) {
            log.debug("No client left for this answer ({}): {}", status, failure.getMessage());
        } else {
            log.warn("A request failed after its client went away", failure);
        }
    }
}
