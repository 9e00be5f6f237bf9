package io.gpupool.serving;

/** Loads one model of the repository by name, on every device (the repository extension's source). */
@FunctionalInterface
public interface ModelLoader {

    /**
     * Loads the folder {@code name} (already checked to be a safe name) onto every device, fully
     * validated; on failure nothing it loaded stays allocated.
     *
     * @throws ServingException 404 when there is no such folder, 400 with the reason when it does not load
     */
    ServedModel load(String name);
}
