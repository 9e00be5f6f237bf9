package io.gpupool.actuate.security;

import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;

/**
 * The operator credential ({@code gpupool.security.*}) that write and delete operations on the
 * actuator need (tuning and trimming the pools, recording a trace).
 *
 * @param operatorUsername user name for HTTP Basic; default {@code operator}
 * @param operatorPassword password for HTTP Basic. No default: required in the {@code production}
 *                         profile (start-up fails without it; pass it from a Secret, e.g. the environment
 *                         variable {@code GPUPOOL_SECURITY_OPERATOR_PASSWORD}); elsewhere a random one is
 *                         generated at start-up and logged once
 */
@ConfigurationProperties("gpupool.security")
public record OperatorSecurityProperties(@DefaultValue("operator") String operatorUsername,
                                         @Nullable String operatorPassword) {

    public OperatorSecurityProperties {
        if (operatorUsername == null || operatorUsername.isBlank()) {
            throw new IllegalArgumentException(
                    "gpupool.security.operator-username = '" + operatorUsername + "' is invalid; allowed: a non-blank name");
        }
    }
}
