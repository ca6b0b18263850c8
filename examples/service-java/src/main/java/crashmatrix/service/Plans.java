package crashmatrix.service;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.text.Normalizer;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;

/**
 * The plan: what the model's extraction turns into before anything is
 * written (GraphIngestionService.plan), in crashmatrix's plan encoding
 * (docs/service-protocol.md section 11): the graph mutation, the document's
 * previous and next state, the stale edges and the registrations. Node ids
 * are HashGraphEntityIdGenerator's.
 */
final class Plans {
    private Plans() {}

    static String sha256Hex(String s) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** NFKC, trimmed, inner white space runs to one space, lower case. */
    static String normalize(String s) {
        String n = Normalizer.normalize(s, Normalizer.Form.NFKC).trim();
        return n.isEmpty() ? "" : String.join(" ", n.split("\\s+")).toLowerCase(Locale.ROOT);
    }

    /** lower(trim(type)) ":" hex(SHA-256(norm(type) "\n" norm(name))[0:12]). */
    static String nodeId(String type, String name) {
        return type.trim().toLowerCase(Locale.ROOT) + ":" + sha256Hex(normalize(type) + "\n" + normalize(name)).substring(0, 24);
    }

    /** The default operationId of an ingestion: the intent (space, document, content, base revision). */
    static String ingestOperationId(String space, String doc, String contentHash, long baseRevision) {
        return "ingest-" + sha256Hex(space + "\0" + doc + "\0" + contentHash + "\0" + baseRevision).substring(0, 32);
    }

    static String retractOperationId(String space, String doc, long previousRevision) {
        return "retract-" + sha256Hex(space + "\0" + doc + "\0" + previousRevision).substring(0, 32);
    }

    static JsonObject edgeKey(String source, String type, String target) {
        JsonObject k = new JsonObject();
        k.addProperty("source", source);
        k.addProperty("type", type);
        k.addProperty("target", target);
        k.addProperty("rank", 0);
        return k;
    }

    static String portable(JsonObject k) {
        return Stores.str(k, "source") + "\u001f" + Stores.str(k, "type") + "\u001f" + Stores.str(k, "target") + "\u001f"
                + (k.has("rank") ? k.get("rank").getAsLong() : 0);
    }

    static boolean sameEdge(JsonObject a, JsonObject b) {
        return portable(a).equals(portable(b));
    }

    /** A registration's normalised names: canonical name and aliases, sorted, distinct. */
    static TreeSet<String> names(JsonObject reg) {
        TreeSet<String> names = new TreeSet<>();
        names.add(normalize(Stores.str(reg, "canonicalName")));
        if (reg.has("aliases")) {
            for (JsonElement a : reg.getAsJsonArray("aliases")) {
                names.add(normalize(a.getAsString()));
            }
        }
        return names;
    }

    private static JsonObject plan(String kind, String opId, String space, String doc, JsonObject mutation, JsonObject prev, JsonObject next) {
        JsonObject p = new JsonObject();
        p.addProperty("kind", kind);
        p.addProperty("operationId", opId);
        p.addProperty("space", space);
        p.addProperty("documentId", doc);
        JsonObject options = new JsonObject();
        options.addProperty("space", space);
        p.add("options", options);
        p.add("mutation", mutation);
        if (prev != null) {
            p.add("previousState", prev);
        }
        p.add("nextState", next);
        return p;
    }

    private static JsonObject nextState(String space, String doc, long rev, String opId, String hash, String model, String status) {
        JsonObject n = new JsonObject();
        n.addProperty("space", space);
        n.addProperty("documentId", doc);
        n.addProperty("revision", rev);
        n.addProperty("operationId", opId);
        n.addProperty("contentHash", hash);
        n.addProperty("extractionFingerprint", model);
        n.addProperty("status", status);
        return n;
    }

    /** The ingestion plan of the model's extraction against the document's current state (prev, or null). */
    static JsonObject ingestion(String opId, String space, String doc, String content, JsonObject prev, JsonObject ex) {
        Map<String, String> ids = new LinkedHashMap<>();
        JsonArray upsertNodes = new JsonArray(), registrations = new JsonArray();
        TreeSet<String> nodeIds = new TreeSet<>();
        for (JsonElement e : ex.getAsJsonArray("entities")) {
            JsonObject en = e.getAsJsonObject();
            String type = Stores.str(en, "type"), name = Stores.str(en, "name");
            String id = nodeId(type, name);
            ids.put(normalize(type) + "\n" + normalize(name), id);
            JsonArray aliases = en.has("aliases") ? en.getAsJsonArray("aliases") : new JsonArray();
            for (JsonElement a : aliases) {
                ids.put(normalize(type) + "\n" + normalize(a.getAsString()), id);
            }
            if (nodeIds.add(id)) {
                JsonObject props = new JsonObject();
                props.addProperty("name", name);
                if (en.has("properties")) {
                    for (Map.Entry<String, JsonElement> p : en.getAsJsonObject("properties").entrySet()) {
                        props.add(p.getKey(), p.getValue());
                    }
                }
                JsonObject n = new JsonObject();
                n.addProperty("id", id);
                n.addProperty("label", type);
                n.add("properties", props);
                upsertNodes.add(n);
                JsonObject r = new JsonObject();
                r.addProperty("nodeId", id);
                r.addProperty("type", type);
                r.addProperty("canonicalName", name);
                if (!aliases.isEmpty()) {
                    r.add("aliases", aliases);
                }
                registrations.add(r);
            }
        }
        JsonArray upsertEdges = new JsonArray();
        Map<String, JsonObject> facts = new java.util.TreeMap<>();
        if (ex.has("relations")) {
            for (JsonElement e : ex.getAsJsonArray("relations")) {
                JsonObject r = e.getAsJsonObject();
                String s = ids.get(normalize(Stores.str(r, "sourceType")) + "\n" + normalize(Stores.str(r, "sourceName")));
                String t = ids.get(normalize(Stores.str(r, "targetType")) + "\n" + normalize(Stores.str(r, "targetName")));
                if (s == null || t == null) {
                    continue;
                }
                JsonObject k = edgeKey(s, Stores.str(r, "type"), t);
                if (facts.putIfAbsent(portable(k), k) != null) {
                    continue;
                }
                JsonObject eu = new JsonObject();
                eu.add("key", k);
                if (r.has("properties")) {
                    eu.add("properties", r.get("properties"));
                }
                upsertEdges.add(eu);
            }
        }
        JsonArray stale = new JsonArray();
        if (prev != null && prev.has("factSources") && prev.get("factSources").isJsonArray()) {
            for (JsonElement e : prev.getAsJsonArray("factSources")) {
                if (!facts.containsKey(portable(e.getAsJsonObject()))) {
                    stale.add(e);
                }
            }
        }
        JsonObject m = new JsonObject();
        m.addProperty("operationId", opId);
        if (!stale.isEmpty()) {
            m.add("deleteEdges", stale);
        }
        m.add("upsertNodes", upsertNodes);
        if (!upsertEdges.isEmpty()) {
            m.add("upsertEdges", upsertEdges);
        }
        long rev = prev == null ? 1 : prev.get("revision").getAsLong() + 1;
        JsonObject next = nextState(space, doc, rev, opId, sha256Hex(content), Stores.str(ex, "model"), "ACTIVE");
        JsonArray fs = new JsonArray();
        facts.values().forEach(fs::add);
        next.add("factSources", fs);
        JsonArray ns = new JsonArray();
        nodeIds.forEach(ns::add);
        next.add("nodeIds", ns);
        JsonObject p = plan("INGESTION", opId, space, doc, m, prev, next);
        if (!stale.isEmpty()) {
            p.add("staleEdges", stale);
        }
        p.add("registrations", registrations);
        p.addProperty("content", content);
        p.addProperty("extractionCall", ex.get("call").getAsInt());
        return p;
    }

    /** The retraction of the current state: RETRACTED, and its edges deleted (those no other document supports). */
    static JsonObject retraction(String opId, JsonObject cur) {
        String space = Stores.str(cur, "space"), doc = Stores.str(cur, "documentId");
        JsonArray facts = cur.has("factSources") && cur.get("factSources").isJsonArray() ? cur.getAsJsonArray("factSources") : new JsonArray();
        JsonObject m = new JsonObject();
        m.addProperty("operationId", opId);
        if (!facts.isEmpty()) {
            m.add("deleteEdges", facts.deepCopy());
        }
        JsonObject next = nextState(space, doc, cur.get("revision").getAsLong() + 1, opId, Stores.str(cur, "contentHash"),
                Stores.str(cur, "extractionFingerprint"), "RETRACTED");
        JsonObject p = plan("RETRACTION", opId, space, doc, m, cur, next);
        if (!facts.isEmpty()) {
            p.add("staleEdges", facts.deepCopy());
        }
        return p;
    }

    static long expectedRevision(JsonObject plan) {
        return plan.has("previousState") ? plan.getAsJsonObject("previousState").get("revision").getAsLong() : 0;
    }

    /** The mutation in batches of at most n changes, in the writer's phase order. */
    static List<JsonObject> batches(JsonObject m, int n) {
        List<JsonObject> out = new ArrayList<>();
        JsonObject cur = null;
        int size = 0;
        for (String phase : new String[] {"deleteNodes", "deleteEdges", "upsertNodes", "upsertEdges"}) {
            if (!m.has(phase)) {
                continue;
            }
            for (JsonElement x : m.getAsJsonArray(phase)) {
                if (cur == null) {
                    cur = new JsonObject();
                    cur.addProperty("operationId", Stores.str(m, "operationId"));
                    size = 0;
                }
                if (!cur.has(phase)) {
                    cur.add(phase, new JsonArray());
                }
                cur.getAsJsonArray(phase).add(x);
                if (++size == n) {
                    out.add(cur);
                    cur = null;
                }
            }
        }
        if (cur != null) {
            out.add(cur);
        }
        return out;
    }
}
