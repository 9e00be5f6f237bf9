package io.gpupool.config;

import java.util.List;

import org.springframework.beans.BeansException;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.security.config.ObjectPostProcessor;
import org.springframework.security.web.server.SecurityWebFilterChain;
import org.springframework.security.web.server.WebFilterChainProxy.WebFilterChainDecorator;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;

/**
 * Runs the inference API's security chain without Spring Security's observations, and every other chain
 * with them.
 *
 * <p>When an observation registry is present, Spring Security wraps each request's pass through its
 * chain in observations: one around the secured request, one before and one after the filters, each
 * started and stopped with a timer, a long-task timer and their tags. For the open inference chain,
 * which authenticates nobody and decides nothing, that is most of its cost per request and measures
 * nothing an operator acts on; {@code http.server.requests} still times every request. The actuator's
 * chain (logins, denials) stays observed.
 *
 * <p>How: Spring Security obtains its chain decorator through an {@link ObjectPostProcessor} bean (the
 * observing one when observation is on). This post-processor wraps that bean so that the decorator it
 * produces routes by chain: a chain whose filters are the inference chain's runs plainly, any other
 * through the observing decorator. The inference chain's filters are taken from its bean when it is
 * created; a request's matched chain arrives as that same list of filter instances.
 */
final class InferenceChainUnobserved implements BeanPostProcessor {

    /** The bean name of the inference API's chain ({@link InferenceApiSecurity}). */
    static final String INFERENCE_CHAIN = "inferenceApiSecurityChain";

    /**
     * Spring Security's name for its chain-decorator post-processor (its reactive observation configuration).
     * Should it change, the inference chain is observed again, and ServingApplicationTest says so.
     */
    private static final String DECORATOR_POST_PROCESSOR = "filterChainDecoratorPostProcessor";

    /** The inference chain's first filter, identifying its filter list; null until that bean exists. */
    private volatile WebFilter inferenceChainFirstFilter;

    @Override
    @SuppressWarnings("unchecked")
    public Object postProcessAfterInitialization(Object bean, String beanName) throws BeansException {
        if (bean instanceof SecurityWebFilterChain chain && INFERENCE_CHAIN.equals(beanName)) {
            // on the thread creating the context: the filters are a list in memory, collected at once
            List<WebFilter> filters = chain.getWebFilters().collectList().block();
            inferenceChainFirstFilter = filters == null || filters.isEmpty() ? null : filters.getFirst();
        } else if (bean instanceof ObjectPostProcessor<?> processor && DECORATOR_POST_PROCESSOR.equals(beanName)) {
            return new RoutingPostProcessor((ObjectPostProcessor<WebFilterChainDecorator>) processor);
        }
        return bean;
    }

    private boolean isInferenceChain(List<WebFilter> filters) {
        WebFilter first = inferenceChainFirstFilter;
        return first != null && !filters.isEmpty() && filters.getFirst() == first;
    }

    /** Spring Security's decorator post-processor, with the inference chain routed around its result. */
    private final class RoutingPostProcessor implements ObjectPostProcessor<WebFilterChainDecorator> {

        private final ObjectPostProcessor<WebFilterChainDecorator> delegate;

        RoutingPostProcessor(ObjectPostProcessor<WebFilterChainDecorator> delegate) {
            this.delegate = delegate;
        }

        @Override
        public <O extends WebFilterChainDecorator> O postProcess(O plain) {
            WebFilterChainDecorator observed = delegate.postProcess(plain);
            if (observed == plain) {
                return plain;       // observation is off: nothing to route around
            }
            @SuppressWarnings("unchecked")
            O routed = (O) new RoutingDecorator(plain, observed);
            return routed;
        }
    }

    /** Plain for the inference chain, observed for the others and for requests no chain matched. */
    private final class RoutingDecorator implements WebFilterChainDecorator {

        private final WebFilterChainDecorator plain;
        private final WebFilterChainDecorator observed;

        RoutingDecorator(WebFilterChainDecorator plain, WebFilterChainDecorator observed) {
            this.plain = plain;
            this.observed = observed;
        }

        @Override
        public WebFilterChain decorate(WebFilterChain original) {
            return observed.decorate(original);
        }

        @Override
        public WebFilterChain decorate(WebFilterChain original, List<WebFilter> filters) {
            return isInferenceChain(filters) ? plain.decorate(original, filters) : observed.decorate(original, filters);
        }
    }
}
