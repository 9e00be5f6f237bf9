package io.gpupool;

import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

/**
 * The arrows of the architecture: the pool core is plain Java, and JCuda stays inside the CUDA backend.
 */
@AnalyzeClasses(packages = "io.gpupool", importOptions = ImportOption.DoNotIncludeTests.class)
class ArchitectureTest {

    @ArchTest
    static final ArchRule memoryDependsOnNeitherSpringNorJcuda = noClasses()
            .that().resideInAPackage("io.gpupool.memory..")
            .should().dependOnClassesThat().resideInAnyPackage("org.springframework..", "jcuda..")
            .because("the pool core is plain Java, usable and testable without Spring or a GPU");

    @ArchTest
    static final ArchRule jcudaOnlyInTheCudaBackend = noClasses()
            .that().resideOutsideOfPackage("io.gpupool.backend.cuda..")
            .should().dependOnClassesThat().resideInAPackage("jcuda..")
            .because("backend.cuda is the only package that talks to the CUDA driver through JCuda");

    @ArchTest
    static final ArchRule kernelsModelsAndServingDoNotImportJcuda = noClasses()
            .that().resideInAnyPackage("io.gpupool.kernels..", "io.gpupool.model..", "io.gpupool.serving..")
            .should().dependOnClassesThat().resideInAPackage("jcuda..")
            .because("kernels, models and serving reach the device only through the backend interfaces");

    @ArchTest
    static final ArchRule memoryDoesNotDependOnOuterLayers = noClasses()
            .that().resideInAPackage("io.gpupool.memory..")
            .should().dependOnClassesThat().resideInAnyPackage("io.gpupool.backend..", "io.gpupool.model..",
                    "io.gpupool.serving..", "io.gpupool.kernels..", "io.gpupool.actuate..", "io.gpupool.config..")
            .because("arrows point inward: the other layers depend on memory, never the other way round");
}
