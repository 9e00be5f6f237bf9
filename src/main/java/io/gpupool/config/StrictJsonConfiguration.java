package io.gpupool.config;

import org.springframework.boot.jackson.autoconfigure.JsonMapperBuilderCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import tools.jackson.core.StreamReadFeature;

/**
 * Every JSON body that Spring reads for the server (the actuator's tuning and trim bodies among them) refuses a field
 * given twice, as the inference request and the repository bodies do: otherwise the last one wins silently, and an
 * operator who meant the first, or a proxy that checked it, is misled. Such a body is answered 400 naming the field
 * ({@link ManagementBodyErrors}).
 */
@Configuration(proxyBeanMethods = false)
public class StrictJsonConfiguration {

    @Bean
    JsonMapperBuilderCustomizer gpupoolRefusesDuplicateFields() {
        return builder -> builder.enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION);
    }
}
