package io.gpupool;

import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;
import com.tngtech.archunit.library.dependencies.SliceAssignment;
import com.tngtech.archunit.library.dependencies.SliceIdentifier;
import io.gpupool.memory.pool.DevicePool;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

/**
 * The shape of the pool core: a thin public facade over package-private parts, parts that never
 * call back into the facade, and no dependency cycles between the subpackages of {@code memory}
 * (pool, source, trace, bestfit, metric) nor between the parts of the pool.
 */
@AnalyzeClasses(packages = "io.gpupool.memory", importOptions = ImportOption.DoNotIncludeTests.class)
class MemoryArchitectureTest {

    private static final String POOL = "io.gpupool.memory.pool";

    @ArchTest
    static final ArchRule onlyTheFacadeIsPublic = classes()
            .that().resideInAPackage(POOL).and().doNotBelongToAnyOf(DevicePool.class)
            .should().notBePublic()
            .because("the parts of the pool are reached only through DevicePool");

    @ArchTest
    static final ArchRule partsNeverCallBackIntoTheFacade = noClasses()
            .that().resideInAPackage(POOL).and().doNotBelongToAnyOf(DevicePool.class)
            .should().dependOnClassesThat().belongToAnyOf(DevicePool.class)
            .because("a part gets the narrow interface it needs, never the facade");

    @ArchTest
    static final ArchRule noCyclesBetweenMemoryPackages = slices().matching("io.gpupool.memory.(*)..")
            .should().beFreeOfCycles();

    @ArchTest
    static final ArchRule noCyclesBetweenTheParts = slices().assignedFrom(new PoolParts())
            .should().beFreeOfCycles()
            .because("each part can be read and tested on top of the parts below it");

    /** One slice per top-level class of the pool package (a nested class belongs to its outer class). */
    private static final class PoolParts implements SliceAssignment {

        @Override
        public SliceIdentifier getIdentifierOf(JavaClass javaClass) {
            if (!javaClass.getPackageName().equals(POOL)) {
                return SliceIdentifier.ignore();
            }
            String name = javaClass.getName().substring(POOL.length() + 1);
            int nested = name.indexOf('$');
            return SliceIdentifier.of(nested < 0 ? name : name.substring(0, nested));
        }

        @Override
        public String getDescription() {
            return "the top-level classes of " + POOL;
        }
    }
}
