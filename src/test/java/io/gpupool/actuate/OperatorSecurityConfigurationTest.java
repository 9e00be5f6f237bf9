package io.gpupool.actuate;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpupool.actuate.security.OperatorSecurityConfiguration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.security.autoconfigure.web.reactive.ReactiveWebSecurityAutoConfiguration;
import org.springframework.boot.test.context.runner.ReactiveWebApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.security.core.userdetails.MapReactiveUserDetailsService;
import org.springframework.security.core.userdetails.UserDetails;

/** How the operator credential is obtained in each profile. */
@ExtendWith(OutputCaptureExtension.class)
class OperatorSecurityConfigurationTest {

    final ReactiveWebApplicationContextRunner runner = new ReactiveWebApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ReactiveWebSecurityAutoConfiguration.class))
            .withUserConfiguration(OperatorSecurityConfiguration.class);

    @Test
    void theProductionProfileRefusesToStartWithoutAConfiguredPassword() {
        runner.withPropertyValues("spring.profiles.active=production").run(context -> {
            assertThat(context).hasFailed();
            assertThat(context.getStartupFailure()).rootCause()
                    .hasMessageContaining("gpupool.security.operator-password is not set");
        });
    }

    @Test
    void theProductionProfileUsesTheConfiguredCredential() {
        runner.withPropertyValues("spring.profiles.active=production", "gpupool.security.operator-username=ops",
                "gpupool.security.operator-password=from-a-secret").run(context -> {
            assertThat(context).hasNotFailed();
            UserDetails ops = context.getBean(MapReactiveUserDetailsService.class).findByUsername("ops").block();
            assertThat(ops).isNotNull();
            assertThat(ops.getAuthorities()).extracting(Object::toString).containsExactly("ROLE_OPERATOR");
            assertThat(ops.getPassword()).doesNotContain("from-a-secret"); // stored encoded
        });
    }

    @Test
    void otherProfilesGenerateARandomPasswordAndLogItOnce(CapturedOutput output) {
        runner.run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(output).containsOnlyOnce("generated operator password for user 'operator'");
        });
    }
}
