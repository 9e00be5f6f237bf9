package io.gpupool.serving.protocol;

import java.util.ArrayDeque;

import tools.jackson.core.JsonParser;
import tools.jackson.core.JsonToken;
import tools.jackson.databind.DeserializationContext;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.ValueDeserializer;
import tools.jackson.databind.node.ArrayNode;

/**
 * Reads an input's {@code data} into a tree while counting its elements, and stops with an error as soon
 * as they pass the bound the reader carries as attribute {@link #MAX_ELEMENTS} (the most elements any
 * input of the model can take). A tree costs tens of bytes per element, so a data array far beyond what
 * the model accepts is refused after the bound is passed, not after all of it has been parsed.
 * Walks nested arrays without recursion; the parser's own depth limit applies. Each element becomes the node
 * {@link DeserializationContext#readTree} would make of it, through the tree deserializer looked up once per array:
 * {@code readTree} looks it up again for every element, in a cache whose upkeep cost more than the parsing.
 */
public final class BoundedDataDeserializer extends ValueDeserializer<JsonNode> {

    /** Reader attribute: a {@link Bound}, or absent for no bound. */
    public static final String MAX_ELEMENTS = "gpupool.maxDataElements";

    /**
     * The most elements an input of {@code model} takes, and the count past which parsing stops: twice
     * that plus 1024, so that a near miss still reaches the validation that names the exact problem (shape,
     * batch size) and only a grossly oversized array is cut short here.
     */
    public record Bound(long modelMaxElements, String model) {
        long stopAfter() {
            return modelMaxElements > (Long.MAX_VALUE - 1024) / 2 ? Long.MAX_VALUE : 2 * modelMaxElements + 1024;
        }
    }

    @Override
    public JsonNode deserialize(JsonParser parser, DeserializationContext context) {
        if (!parser.isExpectedStartArrayToken()) {
            return context.readTree(parser);
        }
        Bound bound = context.getAttribute(MAX_ELEMENTS) instanceof Bound b ? b : null;
        long elements = 0;
        ArrayNode root = context.getNodeFactory().arrayNode();
        ArrayDeque<ArrayNode> open = new ArrayDeque<>();
        open.push(root);
        ValueDeserializer<Object> nodes = null;   // the tree deserializer, looked up at the first element
        while (!open.isEmpty()) {
            JsonToken token = parser.nextToken();
            if (token == null) {
                return context.reportInputMismatch(this, "'data' ends before its array is closed");
            }
            switch (token) {
                case END_ARRAY -> open.pop();
                case START_ARRAY -> {
                    ArrayNode child = context.getNodeFactory().arrayNode();
                    open.peek().add(child);
                    open.push(child);
                }
                default -> {
                    if (bound != null && ++elements > bound.stopAfter()) {
                        return context.reportInputMismatch(this, "'data' holds more than %d elements, far more than "
                                + "any input of model '%s' takes (at most %d)", bound.stopAfter(), bound.model(),
                                bound.modelMaxElements());
                    }
                    if (token == JsonToken.VALUE_NULL) {
                        open.peek().add(context.getNodeFactory().nullNode());      // as readTree makes it
                    } else {
                        if (nodes == null) {
                            nodes = context.findRootValueDeserializer(context.constructType(JsonNode.class));
                        }
                        open.peek().add((JsonNode) nodes.deserialize(parser, context));
                    }
                }
            }
        }
        return root;
    }
}
