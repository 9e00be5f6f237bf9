package io.gpupool.config;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import org.junit.jupiter.api.Test;

import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

class KeepAliveReadResumeTest {

    /** Counts the reads asked for by the handlers after it. */
    private static final class Reads extends ChannelOutboundHandlerAdapter {
        final AtomicInteger count = new AtomicInteger();

        @Override
        public void read(ChannelHandlerContext ctx) {
            count.incrementAndGet();
            ctx.read();
        }
    }

    @Test
    void theShippedReactorNettyFiresTheEventTheResumeWaitsFor() {
        assertThat(KeepAliveReadResume.INSTANCE.active())
                .as("%s exists: after an upgrade that renamed it, kept-alive connections stop reading again",
                        KeepAliveReadResume.TERMINATED_EVENT)
                .isTrue();
    }

    @Test
    void aReadIsAskedForAfterTheHandlersBehindItSawTheEndOfAnExchange() throws Exception {
        Object terminated = terminatedEvent();
        Reads reads = new Reads();
        EmbeddedChannel channel = new EmbeddedChannel(false, false, reads, KeepAliveReadResume.INSTANCE);
        channel.config().setAutoRead(false);
        channel.register();
        int before = reads.count.get();

        channel.pipeline().fireUserEventTriggered(terminated);
        assertThat(reads.count.get()).as("queued behind the traffic handler's own drain, not run at once").isEqualTo(before);
        channel.runPendingTasks();
        assertThat(reads.count.get()).isEqualTo(before + 1);

        channel.pipeline().fireUserEventTriggered("another event");
        channel.runPendingTasks();
        assertThat(reads.count.get()).as("other events ask for nothing").isEqualTo(before + 1);
        channel.finishAndReleaseAll();
    }

    private static Object terminatedEvent() throws ReflectiveOperationException {
        var field = Class.forName(KeepAliveReadResume.TERMINATED_EVENT).getDeclaredField("INSTANCE");
        field.setAccessible(true);
        return field.get(null);
    }
}
