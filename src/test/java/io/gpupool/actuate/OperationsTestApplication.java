package io.gpupool.actuate;

import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

import io.gpupool.actuate.security.OperatorSecurityConfiguration;
import io.gpupool.config.HttpServerLimits;
import io.gpupool.config.StrictJsonConfiguration;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/**
 * The operations layer alone (actuator, security, meters) over two fake pools, without backends,
 * models or serving: what the endpoint and security tests start. Its servers get the production
 * server's limits and pipeline ({@link HttpServerLimits}): a kept-alive connection otherwise stalls now
 * and then (reactor-netty stops reading it after an exchange) and the tests would time out. Run by hand with
 * {@code ./mvnw spring-boot:test-run -Dspring-boot.run.main-class=io.gpupool.actuate.OperationsTestApplication}.
 */
@SpringBootConfiguration
@EnableAutoConfiguration
@Import({OperationsConfiguration.class, OperatorSecurityConfiguration.class, HttpServerLimits.class,
        StrictJsonConfiguration.class})
class OperationsTestApplication {

    /** Serves the actuator and dashboard over the fake pools, for working on the page by hand. */
    public static void main(String[] args) {
        SpringApplication.run(OperationsTestApplication.class, args);
    }

    @Bean
    FakePool cuda0() {
        return new FakePool("cuda:0", true);
    }

    @Bean
    FakePool cuda1() {
        return new FakePool("cuda:1", false);
    }

    /** cuda:0 has CUDA graphs, cuda:1 none. */
    @Bean
    FakeGraphCache cuda0Graphs() {
        return new FakeGraphCache();
    }

    @Bean
    ManagedGraphs managedGraphs(FakeGraphCache cuda0Graphs) {
        return new ManagedGraphs(Map.of("cuda:0", cuda0Graphs));
    }

    /** Readiness of the models, switched by the test. */
    @Bean
    AtomicBoolean modelsWarmedUp() {
        return new AtomicBoolean();
    }

    @Bean
    ModelsHealthIndicator modelsHealthIndicator(AtomicBoolean modelsWarmedUp) {
        return new ModelsHealthIndicator(modelsWarmedUp::get, () -> Map.of("models", 2));
    }
}
