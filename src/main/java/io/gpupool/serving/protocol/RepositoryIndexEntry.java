package io.gpupool.serving.protocol;

import com.fasterxml.jackson.annotation.JsonInclude;

/**
 * One element of the {@code POST /v2/repository/index} answer.
 *
 * @param state  {@code READY}, {@code LOADING} (warm-up still running) or {@code UNAVAILABLE}
 * @param reason why the model is unavailable; absent otherwise
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public record RepositoryIndexEntry(String name, String version, String state, String reason) {
}
