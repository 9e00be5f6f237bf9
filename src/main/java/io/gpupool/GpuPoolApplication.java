package io.gpupool;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;

/** Entry point: a KServe v2 inference server whose device memory comes from a two-level pool. */
@SpringBootApplication
@ConfigurationPropertiesScan
public class GpuPoolApplication {

    public static void main(String[] args) {
        SpringApplication.run(GpuPoolApplication.class, args);
    }
}
