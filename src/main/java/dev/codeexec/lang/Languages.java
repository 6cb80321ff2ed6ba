package dev.codeexec.lang;

import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The languages table, loaded once from the {@code languages.json} resource, plus the tools runtime_info reports.
 * Lookups accept ids and aliases, case-insensitively.
 */
public final class Languages {

    private final List<Language> all;
    private final Map<String, Language> byName;
    private final Map<String, List<String>> tools;

    private Languages(List<Language> all, Map<String, List<String>> tools) {
        this.all = List.copyOf(all);
        this.tools = Collections.unmodifiableMap(new LinkedHashMap<>(tools));
        Map<String, Language> names = new LinkedHashMap<>();
        for (Language l : all) {
            for (String n : names(l)) {
                if (names.putIfAbsent(n, l) != null)
                    throw new IllegalStateException("languages table: name '" + n + "' is used twice");
            }
        }
        this.byName = Collections.unmodifiableMap(names);
    }

    private static List<String> names(Language l) {
        List<String> n = new ArrayList<>();
        n.add(l.id().toLowerCase());
        l.aliases().forEach(a -> n.add(a.toLowerCase()));
        return n;
    }

    /** The table shipped in the jar. */
    public static Languages load() {
        try (InputStream in = Languages.class.getResourceAsStream("/languages.json")) {
            if (in == null) throw new IllegalStateException("languages.json is missing from the classpath");
            return parse(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public static Languages parse(InputStream in) {
        JsonNode root = JsonMapper.shared().readTree(in);
        List<Language> langs = new ArrayList<>();
        for (JsonNode row : root.path("languages").values()) {
            String id = row.path("id").asString();
            Language l = new Language(id, strings(row.path("aliases")), row.path("extension").asString(),
                    row.has("compile") ? Optional.of(strings(row.path("compile"))) : Optional.empty(),
                    strings(row.path("run")), strings(row.path("version")), stringMap(row.path("env")),
                    strings(row.path("binds")), warmup(row.path("warmup")), interpreter(row.path("warm")),
                    interpreter(row.path("session")));
            checkPlaceholders(l);
            langs.add(l);
        }
        Map<String, List<String>> tools = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> e : root.path("tools").properties()) tools.put(e.getKey(), strings(e.getValue()));
        return new Languages(langs, tools);
    }

    private static Optional<Language.Warmup> warmup(JsonNode w) {
        if (w.isMissingNode() || w.isNull()) return Optional.empty();
        return Optional.of(new Language.Warmup(w.path("program").asString(), strings(w.path("argv")),
                stringMap(w.path("env")), w.path("produces").asString()));
    }

    private static Optional<Language.Interpreter> interpreter(JsonNode i) {
        if (i.isMissingNode() || i.isNull()) return Optional.empty();
        return Optional.of(new Language.Interpreter(strings(i.path("argv")), stringMap(i.path("env")),
                i.path("message").asString("json"), i.path("preload").asString(""), i.path("stdin").asBoolean(false),
                strings(i.path("stdio"))));
    }

    private static void checkPlaceholders(Language l) {
        List<String> all = new ArrayList<>(l.run());
        l.compile().ifPresent(all::addAll);
        all.addAll(l.version());
        all.addAll(l.env().values());
        all.addAll(l.binds());
        l.warmup().ifPresent(w -> {
            all.addAll(w.argv());
            all.addAll(w.env().values());
            all.add(w.produces());
        });
        for (Optional<Language.Interpreter> i : List.of(l.warm(), l.session()))
            i.ifPresent(x -> {
                all.addAll(x.argv());
                all.addAll(x.stdio());
                all.addAll(x.env().values());
            });
        all.forEach(t -> Placeholders.check("language " + l.id(), t));
    }

    private static List<String> strings(JsonNode array) {
        return array.values().stream().map(JsonNode::asString).toList();
    }

    private static Map<String, String> stringMap(JsonNode object) {
        Map<String, String> m = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> e : object.properties()) m.put(e.getKey(), e.getValue().asString());
        return m;
    }

    /** The language for an id or alias (any case). */
    public Optional<Language> find(String name) {
        return name == null ? Optional.empty() : Optional.ofNullable(byName.get(name.trim().toLowerCase()));
    }

    public List<Language> all() {
        return all;
    }

    /** Canonical ids, in table order (for error messages and schemas). */
    public List<String> ids() {
        return all.stream().map(Language::id).toList();
    }

    /** Every accepted name: the ids in table order, then each language's aliases (for an input schema's enum). */
    public List<String> names() {
        List<String> names = new ArrayList<>(ids());
        all.forEach(l -> names.addAll(l.aliases()));
        return List.copyOf(names);
    }

    /** Tool name → version argv, for runtime_info. */
    public Map<String, List<String>> tools() {
        return tools;
    }
}
