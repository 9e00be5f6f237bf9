package io.gpupool.backend.cuda;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Where the loader looks for cuBLASLt and what it reports when it finds nothing usable: never an exception, always
 * a reason naming the places tried, so the server logs one line and runs its own kernels. Runs without a GPU.
 */
class LibCublasLtLoadTest {

    @TempDir
    Path folder;

    @Test
    void aConfiguredFolderWithoutTheLibraryIsReportedByNameAndProperty() {
        LibCublasLt.Loaded loaded = LibCublasLt.load(folder, LibCublasLt.NAMES, LibCublasLt.TOOLKIT_FOLDERS);
        assertThat(loaded.library()).isEmpty();
        assertThat(loaded.tried()).isEmpty();   // nothing there to open; the toolkit folders are not searched
        assertThat(loaded.failure()).contains("libcublasLt.so.13", folder.toString(), "gpupool.kernels.cublas-lt-dir");
    }

    @Test
    void aFileThatIsNotALibraryFailsWithTheLinkersMessage() throws IOException {
        Files.writeString(folder.resolve("libcublasLt.so.13"), "not an ELF file");
        LibCublasLt.Loaded loaded = LibCublasLt.load(folder, LibCublasLt.NAMES, LibCublasLt.TOOLKIT_FOLDERS);
        assertThat(loaded.library()).isEmpty();
        assertThat(loaded.tried()).containsExactly(folder.resolve("libcublasLt.so.13").toString());
        assertThat(loaded.failure()).contains("last error", folder.resolve("libcublasLt.so.13").toString());
    }

    @Test
    void withoutAFolderTheLinkerSearchAndTheToolkitFoldersAreTried() {
        List<String> names = List.of("libgpupool-absent-blas.so.99");
        LibCublasLt.Loaded loaded = LibCublasLt.load(null, names, List.of(folder));
        assertThat(loaded.library()).isEmpty();
        assertThat(loaded.tried()).contains("libgpupool-absent-blas.so.99");
        assertThat(loaded.failure()).contains("libgpupool-absent-blas.so.99", "on the library path",
                folder.toString());
    }
}
