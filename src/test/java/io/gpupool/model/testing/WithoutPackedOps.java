package io.gpupool.model.testing;

import io.gpupool.kernels.TensorOps;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;

/**
 * Kernels that say they have no packed-sequence ops and are otherwise {@code real}, every call forwarded: a model
 * loaded with them plans the padded layout for its batches (as CUDA BF16 does) on kernels that have the packed ops,
 * e.g. FP32, so a padded-layout batch can be held against a request alone within FP32's tolerance. The forwards run
 * the kernels of their context, so pass {@code real} there. A dynamic proxy, so that every operation of the
 * interface is forwarded without a list kept here.
 */
public final class WithoutPackedOps {

    private WithoutPackedOps() {
    }

    public static TensorOps over(TensorOps real) {
        return (TensorOps) Proxy.newProxyInstance(TensorOps.class.getClassLoader(), new Class<?>[] {TensorOps.class},
                (proxy, method, arguments) -> {
                    if (method.getName().equals("supportsPackedSequences")) {
                        return false;
                    }
                    if (method.getDeclaringClass() == Object.class) {
                        return switch (method.getName()) {
                            case "equals" -> proxy == arguments[0];
                            case "hashCode" -> System.identityHashCode(proxy);
                            default -> real + " without packed-sequence ops";
                        };
                    }
                    try {
                        return method.invoke(real, arguments);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }
}
