package io.gpupool.deploy;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Just enough of PromQL to tell which series a query reads: the metric names, and each selector's
 * exact label matchers. Not a parser; it relies on the shape of the chart's queries:
 * <ol>
 *   <li>label matchers {@code {...}}, ranges and subqueries {@code [...]} and string literals hold no
 *       metric name, so they are set aside first (the matchers are kept per selector);</li>
 *   <li>grouping clauses ({@code by}, {@code without}, {@code on}, {@code ignoring},
 *       {@code group_left}, {@code group_right}) list label names, not metrics: removed with their
 *       parenthesised list;</li>
 *   <li>of the identifiers left, a name followed by {@code (} is a function or aggregation, a keyword
 *       is an operator, and one that starts inside a number ({@code 1e9}, {@code 5m}) or after a
 *       {@code $} (a Grafana variable) is no name; every other identifier is a metric name.</li>
 * </ol>
 */
final class PromQl {

    private static final Pattern STRING = Pattern.compile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'");
    private static final Pattern SELECTOR = Pattern.compile("([a-zA-Z_:][a-zA-Z0-9_:]*)?\\s*\\{([^}]*)}");
    private static final Pattern MATCHER = Pattern.compile("([a-zA-Z_][a-zA-Z0-9_]*)\\s*(=~|!=|!~|=)\\s*\"((?:[^\"\\\\]|\\\\.)*)\"");
    private static final Pattern BRACKETS = Pattern.compile("\\[[^]]*]");
    private static final Pattern GROUPING = Pattern.compile(
            "\\b(?:by|without|on|ignoring|group_left|group_right)\\s*\\([^)]*\\)");
    private static final Pattern IDENTIFIER = Pattern.compile("[a-zA-Z_:][a-zA-Z0-9_:]*");
    private static final Set<String> KEYWORDS = Set.of("and", "or", "unless", "bool", "offset", "by", "without",
            "on", "ignoring", "group_left", "group_right", "inf", "nan", "atan2", "start", "end");

    /** One selector: a metric name and its exact ({@code =}) label matchers. */
    record Selector(String metric, Map<String, String> equalities) {
    }

    private PromQl() {
    }

    /** Metric names the expression reads, in order of appearance. */
    static Set<String> metricNames(String expr) {
        String rest = SELECTOR.matcher(expr).replaceAll(m -> m.group(1) == null ? " " : m.group(1) + " ");
        rest = STRING.matcher(rest).replaceAll(" ");
        rest = BRACKETS.matcher(rest).replaceAll(" ");
        rest = GROUPING.matcher(rest).replaceAll(" ");
        Set<String> names = new LinkedHashSet<>();
        Matcher m = IDENTIFIER.matcher(rest);
        while (m.find()) {
            String name = m.group();
            boolean insideNumberOrVariable = m.start() > 0 && isNumberOrVariableChar(rest.charAt(m.start() - 1));
            if (insideNumberOrVariable || KEYWORDS.contains(name) || followedByParenthesis(rest, m.end())) {
                continue;
            }
            names.add(name);
        }
        return names;
    }

    /** Every {@code metric{...}} selector with its exact matchers whose values are literal (no variable). */
    static List<Selector> selectors(String expr) {
        List<Selector> selectors = new ArrayList<>();
        Matcher m = SELECTOR.matcher(expr);
        while (m.find()) {
            if (m.group(1) == null) {
                continue;
            }
            Map<String, String> equalities = new LinkedHashMap<>();
            Matcher matcher = MATCHER.matcher(m.group(2));
            while (matcher.find()) {
                if (matcher.group(2).equals("=") && !matcher.group(3).contains("$")) {
                    equalities.put(matcher.group(1), matcher.group(3));
                }
            }
            selectors.add(new Selector(m.group(1), equalities));
        }
        return selectors;
    }

    private static boolean isNumberOrVariableChar(char c) {
        return Character.isDigit(c) || c == '.' || c == '$';
    }

    private static boolean followedByParenthesis(String s, int from) {
        int i = from;
        while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
            i++;
        }
        return i < s.length() && s.charAt(i) == '(';
    }
}
