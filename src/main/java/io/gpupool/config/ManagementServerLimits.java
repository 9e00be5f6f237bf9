package io.gpupool.config;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.reactor.netty.NettyReactiveWebServerFactory;
import org.springframework.boot.web.server.WebServerFactoryCustomizer;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;

/**
 * {@link HttpServerLimits} for the management port's own server. That server belongs to the actuator's
 * child context, and only customisers of that context's server factory reach it, so the limits are
 * added there (this class is listed in {@code META-INF/spring/...ManagementContextConfiguration.imports};
 * it carries no {@code @Configuration} so that component scanning does not also put it in the
 * application's context). When the actuator shares the application's port there is no child context and
 * the bean leaves the one server to {@link HttpServerLimits}. The properties come from the parent context
 * (an application of the operations layer alone, without them, keeps the server's defaults).
 */
public class ManagementServerLimits {

    @Bean
    WebServerFactoryCustomizer<NettyReactiveWebServerFactory> gpupoolManagementServerLimits(
            ObjectProvider<ServerLimitsProperties> properties, ApplicationContext context) {
        boolean ownServer = context.getParent() != null;
        ServerLimitsProperties limits = properties.getIfAvailable();
        return factory -> {
            if (ownServer && limits != null) {
                factory.addServerCustomizers(server -> HttpServerLimits.customize(server, limits, true));
            }
        };
    }
}
