package io.gpupool.serving;

import org.yaml.snakeyaml.Yaml;
import tools.jackson.databind.JsonNode;

import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The component schemas of the protocol's OpenAPI file ({@code shared/specs/open_inference_rest.yaml},
 * beside the repository), and a check of a JSON body against one of them. Covers what that file uses:
 * {@code $ref}, {@code type}, {@code properties}, {@code required}, {@code items}, {@code anyOf},
 * {@code additionalProperties} (a schema or false).
 */
final class OpenApiSchemas {

    private static final String FILE = "specs/open_inference_rest.yaml";

    private final Map<String, Object> schemas;

    private OpenApiSchemas(Map<String, Object> schemas) {
        this.schemas = schemas;
    }

    /** The spec in the {@code shared} folder beside (or above) the working tree, or null when there is none. */
    static OpenApiSchemas find() throws IOException {
        for (Path shared : List.of(Path.of("..", "shared"), Path.of("..", "..", "shared"))) {
            Path file = shared.resolve(FILE);
            if (Files.isRegularFile(file)) {
                try (Reader reader = Files.newBufferedReader(file)) {
                    Map<String, Object> root = new Yaml().load(reader);
                    return new OpenApiSchemas(map(map(root.get("components")).get("schemas")));
                }
            }
        }
        return null;
    }

    /** What in {@code body} does not match schema {@code name}; empty when it matches. */
    List<String> violations(String name, JsonNode body) {
        List<String> problems = new ArrayList<>();
        check(schema(name), body, "$", problems);
        return problems;
    }

    private Map<String, Object> schema(String name) {
        Object schema = schemas.get(name);
        if (schema == null) {
            throw new IllegalArgumentException("no schema '" + name + "' in " + FILE);
        }
        return map(schema);
    }

    private void check(Map<String, Object> schema, JsonNode node, String at, List<String> problems) {
        Object ref = schema.get("$ref");
        if (ref != null) {
            check(schema(ref.toString().substring(ref.toString().lastIndexOf('/') + 1)), node, at, problems);
            return;
        }
        Object anyOf = schema.get("anyOf");
        if (anyOf != null) {
            for (Object option : (List<?>) anyOf) {
                List<String> attempt = new ArrayList<>();
                check(map(option), node, at, attempt);
                if (attempt.isEmpty()) {
                    return;
                }
            }
            problems.add(at + ": matches none of " + anyOf);
            return;
        }
        Object type = schema.get("type");
        if (type != null && !hasType(node, type.toString())) {
            problems.add(at + ": expected " + type + ", found " + node.getNodeType());
            return;
        }
        if (node.isObject()) {
            Object required = schema.get("required");
            if (required != null) {
                for (Object field : (List<?>) required) {
                    if (!node.has(field.toString())) {
                        problems.add(at + ": missing required '" + field + "'");
                    }
                }
            }
            Map<String, Object> properties = schema.get("properties") == null ? Map.of() : map(schema.get("properties"));
            Object additional = schema.get("additionalProperties");
            for (String field : node.propertyNames()) {
                Object property = properties.get(field);
                if (property != null) {
                    check(map(property), node.get(field), at + "." + field, problems);
                } else if (Boolean.FALSE.equals(additional)) {
                    problems.add(at + ": property '" + field + "' is not allowed");
                } else if (additional instanceof Map<?, ?> additionalSchema) {
                    check(map(additionalSchema), node.get(field), at + "." + field, problems);
                }
            }
        }
        if (node.isArray() && schema.get("items") != null) {
            for (int i = 0; i < node.size(); i++) {
                check(map(schema.get("items")), node.get(i), at + "[" + i + "]", problems);
            }
        }
    }

    private static boolean hasType(JsonNode node, String type) {
        return switch (type) {
            case "object" -> node.isObject();
            case "array" -> node.isArray();
            case "string" -> node.isString();
            case "integer" -> node.isIntegralNumber();
            case "number" -> node.isNumber();
            case "boolean" -> node.isBoolean();
            default -> throw new IllegalArgumentException("schema type '" + type + "' is not handled");
        };
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(Object value) {
        return (Map<String, Object>) value;
    }
}
