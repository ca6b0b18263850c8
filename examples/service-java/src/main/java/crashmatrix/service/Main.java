package crashmatrix.service;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.io.PrintStream;
import java.sql.SQLException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The service process: answers hello with the service's declarations, then
 * serves intents (ingest, retract, resume, recover) and the read side of
 * its own stores (docs/service-protocol.md section 11) until stdin ends.
 * Broken variants come from hello's bugs, or from CRASHMATRIX_SERVICE_BUGS
 * (comma-separated) for a run that cannot pass --bug.
 */
public final class Main {
    private Main() {}

    static Map<String, Object> declarations() {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("protocol", Proto.PROTOCOL);
        d.put("name", "agents-flex-graph-ingestion-java");
        d.put("systems", List.of("ingestion"));
        d.put("windows", GraphIngestionService.WINDOWS);
        // The stores its module does not have: the graph writer, the lease
        // provider, and System B's (it implements System A only).
        d.put("harnessStores", List.of("graph", "locks", "checkpoints", "plans"));
        d.put("reports", List.of("events"));
        d.put("clock", "harness");
        return d;
    }

    public static void main(String[] argv) throws Exception {
        Proto proto = new Proto();
        PrintStream err = System.err;
        System.setOut(err); // stdout is the protocol's alone
        GraphIngestionService svc = null;
        Stores db = null;
        boolean greeted = false;
        JsonObject req;
        while ((req = proto.next()) != null) {
            String op = req.get("op").getAsString();
            JsonObject args = req.has("args") && req.get("args").isJsonObject() ? req.getAsJsonObject("args") : new JsonObject();
            try {
                if (op.equals("hello")) {
                    if (!Proto.PROTOCOL.equals(Stores.str(args, "protocol"))) {
                        throw new Proto.ServiceError("unsupported", true, "this service speaks " + Proto.PROTOCOL + ", not " + Stores.str(args, "protocol"));
                    }
                    Set<String> bugs = new TreeSet<>();
                    if (args.has("bugs")) {
                        for (JsonElement b : args.getAsJsonArray("bugs")) {
                            bugs.add(b.getAsString());
                        }
                    }
                    String env = System.getenv("CRASHMATRIX_SERVICE_BUGS");
                    if (env != null && !env.isBlank()) {
                        for (String b : env.split(",")) {
                            bugs.add(b.trim());
                        }
                    }
                    for (String b : bugs) {
                        if (!GraphIngestionService.BUGS.contains(b)) {
                            throw new Proto.ServiceError("unsupported", true, "unknown bug " + b);
                        }
                    }
                    boolean worker = "worker".equals(Stores.str(args, "role"));
                    db = Stores.open(Stores.str(args, "dir"), worker);
                    if (worker) {
                        svc = new GraphIngestionService(proto, db, Stores.str(args, "holder"), args.get("leaseTtlMillis").getAsLong(),
                                args.has("batchSize") ? args.get("batchSize").getAsInt() : 4, bugs);
                    }
                    proto.windows = Set.copyOf(GraphIngestionService.WINDOWS);
                    greeted = true;
                    proto.reply(declarations());
                    continue;
                }
                if (!greeted) {
                    throw new Proto.ServiceError("unsupported", true, "hello first");
                }
                proto.reply(dispatch(svc, db, op, args));
            } catch (Proto.ServiceError e) {
                proto.replyError(e.code, e.definite, e.getMessage());
            } catch (Exception e) {
                // A bug or an unforeseen failure: its effect is unknown.
                e.printStackTrace(err);
                proto.replyError("failed", false, e.toString());
            }
        }
        if (db != null) {
            db.close();
        }
    }

    private static Object dispatch(GraphIngestionService svc, Stores db, String op, JsonObject a) throws SQLException {
        String s = Stores.str(a, "space"), doc = Stores.str(a, "documentId");
        if (svc != null) {
            switch (op) {
                case "ingest":
                    return svc.ingest(s, doc, Stores.str(a, "operationId"), Stores.str(a, "content"));
                case "retract":
                    return svc.retract(s, doc);
                case "resume":
                    return svc.resume(Stores.str(a, "operationId"));
                case "recover":
                    return svc.recover(s, a.get("rounds").getAsInt(), a.get("claimTtlMillis").getAsLong());
                default:
            }
        }
        return read(db, op, a, s, doc);
    }

    /** The read side of the service's own stores, in the store protocol's vocabulary. */
    private static Object read(Stores db, String op, JsonObject a, String s, String doc) throws SQLException {
        JsonObject r = new JsonObject();
        switch (op) {
            case "ops.list":
                r.add("operations", array(db == null ? List.of() : db.allOperations()));
                return r;
            case "ops.getPlan": {
                String[] p = db == null ? null : db.getPlan(Stores.str(a, "operationId"));
                if (p == null) {
                    throw new Proto.ServiceError("not_found", true, "operation " + Stores.str(a, "operationId"));
                }
                r.addProperty("plan", p[0]);
                r.addProperty("fingerprint", p[1]);
                return r;
            }
            case "states.findCurrent": {
                JsonObject st = db == null ? null : db.findCurrent(s, doc);
                r.add("state", st == null ? com.google.gson.JsonNull.INSTANCE : st);
                return r;
            }
            case "states.list":
                r.add("states", array(db == null ? List.of() : db.states(s)));
                return r;
            case "states.versions":
                r.add("states", array(db == null ? List.of() : db.versions(s, doc)));
                return r;
            case "registry.list":
                r.add("entities", array(db == null ? List.of() : db.registry(s)));
                return r;
            default:
                throw new Proto.ServiceError("unsupported", true, "unknown op " + op);
        }
    }

    private static JsonArray array(List<JsonObject> l) {
        JsonArray a = new JsonArray();
        l.forEach(a::add);
        return a;
    }
}
