package io.gpupool.actuate;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpupool.actuate.security.OperatorCredential;
import io.gpupool.actuate.security.OperatorSecurityConfiguration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.security.autoconfigure.web.reactive.ReactiveWebSecurityAutoConfiguration;
import org.springframework.boot.test.context.runner.ReactiveWebApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;

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
            OperatorCredential credential = context.getBean(OperatorCredential.class);
            assertThat(credential.username()).isEqualTo("ops");
            assertThat(credential.matches("ops", "from-a-secret")).isTrue();
        });
    }

    @Test
    void theProductionProfileRefusesAWeakPasswordWithAMessage() {
        runner.withPropertyValues("spring.profiles.active=production", "gpupool.security.operator-password=abc123")
                .run(context -> {
                    assertThat(context).hasFailed();
                    assertThat(context.getStartupFailure()).rootCause()
                            .hasMessageContaining("gpupool.security.operator-password is too weak for the production "
                                    + "profile: 6 characters; use at least 12");
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
