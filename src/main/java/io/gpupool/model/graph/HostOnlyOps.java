package io.gpupool.model.graph;

import io.gpupool.kernels.TensorOps;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;

/**
 * {@link TensorOps} that enqueue nothing: every operation returning {@code void} (the ones that
 * enqueue device work) does nothing, every other method (sizes, workspace queries) asks the real
 * kernels. A forward run with these does all its host work (input checks and conversions, the plan's
 * walk, the copies) and none of its device work: what a dry run and a graph replay need, since the
 * device work is in the graph. A dynamic proxy, so that operations added to the interface are covered
 * without a change here.
 */
final class HostOnlyOps {

    private HostOnlyOps() {
    }

    static TensorOps over(TensorOps real) {
        return (TensorOps) Proxy.newProxyInstance(TensorOps.class.getClassLoader(), new Class<?>[] {TensorOps.class},
                (proxy, method, arguments) -> invoke(real, proxy, method, arguments));
    }

    private static Object invoke(TensorOps real, Object proxy, Method method, Object[] arguments) throws Throwable {
        if (method.getDeclaringClass() == Object.class) {
            return switch (method.getName()) {
                case "equals" -> proxy == arguments[0];
                case "hashCode" -> System.identityHashCode(proxy);
                default -> "host-only view of " + real;
            };
        }
        if (method.getReturnType() == void.class) {
            return null;
        }
        try {
            return method.invoke(real, arguments);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }
}
