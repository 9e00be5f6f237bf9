package io.gpupool;

import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;

import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

/** No two packages of the server import each other, directly or through others: each package a slice. */
@AnalyzeClasses(packages = "io.gpupool", importOptions = ImportOption.DoNotIncludeTests.class)
class PackageCyclesTest {

    @ArchTest
    static final ArchRule noPackageCycles = slices().matching("io.gpupool.(**)")
            .should().beFreeOfCycles()
            .because("a package can be read on top of the packages it uses");
}
