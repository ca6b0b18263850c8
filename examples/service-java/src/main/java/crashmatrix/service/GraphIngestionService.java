package crashmatrix.service;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.sql.SQLException;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * An ingestion service in the shape of Agents-Flex's GraphIngestionService
 * (the design document's stage order): plan via the model, prepareOperation
 * (the operation and its frozen plan, once per operationId), the graph
 * writer, GRAPH_APPLIED, the registry, the state compare-and-set, the
 * version history, COMPLETED. resume continues an operation from its
 * persisted plan and never asks the model again. Its operations, states and
 * registry are its own (SQLite through JDBC, Stores); the graph writer and
 * the per-document lease provider are the harness's (store callbacks), as
 * the team's module has neither.
 *
 * Broken variants (hello's bugs): resume-calls-model (resume asks the model
 * again and runs its answer) and state-before-graph-applied (the state is
 * committed right after prepareOperation, before the graph write).
 */
final class GraphIngestionService {
    static final String RESUME_CALLS_MODEL = "resume-calls-model";
    static final String STATE_BEFORE_GRAPH = "state-before-graph-applied";
    static final Set<String> BUGS = Set.of(RESUME_CALLS_MODEL, STATE_BEFORE_GRAPH);

    static final List<String> WINDOWS = List.of("beforeExtract", "beforePrepare", "beforeGraphWrite", "betweenGraphBatches",
            "beforeGraphApplied", "beforeRegistrySave", "beforeStateCommit", "beforeRecordVersion", "beforeStateCommitted",
            "beforeCompleted", "beforeMarkFailed", "beforeRetryPrepared", "recoveryBeforeClaim", "recoveryBeforeResume");

    private static final Map<String, Integer> RANK = Map.of("PREPARED", 0, "FAILED", 0, "GRAPH_APPLIED", 1, "STATE_COMMITTED", 2, "COMPLETED", 3);
    private static final int MAX_ATTEMPTS = 4;

    /** A failure the service's own retry policy sees; the operation is resumed later. */
    static final class Retry extends Proto.ServiceError {
        Retry(String message) {
            super("failed", true, message);
        }
    }

    private final Proto proto;
    private final Stores db;
    private final String holder;
    private final long leaseTtl;
    private final int batchSize;
    private final Set<String> bugs;
    private int calls;

    GraphIngestionService(Proto proto, Stores db, String holder, long leaseTtl, int batchSize, Set<String> bugs) {
        this.proto = proto;
        this.db = db;
        this.holder = holder;
        this.leaseTtl = leaseTtl > 0 ? leaseTtl : 2000;
        this.batchSize = batchSize > 0 ? batchSize : 4;
        this.bugs = bugs;
    }

    /** An intent's answer: {operationId, outcome, revision}. */
    static JsonObject result(String op, String outcome, long revision) {
        JsonObject r = new JsonObject();
        r.addProperty("operationId", op);
        r.addProperty("outcome", outcome);
        r.addProperty("revision", revision);
        return r;
    }

    private void event(String kind, JsonObject op, Object... kv) {
        JsonObject e = new JsonObject();
        e.addProperty("kind", kind);
        if (op != null) {
            e.addProperty("op", Stores.str(op, "operationId"));
            e.addProperty("space", Stores.str(op, "space"));
            e.addProperty("doc", Stores.str(op, "documentId"));
        }
        for (int i = 0; i < kv.length; i += 2) {
            Object v = kv[i + 1];
            if (v instanceof JsonElement) {
                e.add((String) kv[i], (JsonElement) v);
            } else if (v instanceof Number) {
                e.addProperty((String) kv[i], (Number) v);
            } else {
                e.addProperty((String) kv[i], String.valueOf(v));
            }
        }
        e.addProperty("at", proto.now());
        proto.event(e);
    }

    // ---- the per-document lease (the harness's lock provider) ----

    private final class Lease implements AutoCloseable {
        JsonObject lease;

        Lease(String space, String doc) {
            long deadline = proto.now() + 4 * leaseTtl + 500, backoff = 2;
            String me = holder + "#" + (++calls);
            while (true) {
                JsonObject args = new JsonObject();
                args.addProperty("space", space);
                args.addProperty("documentId", doc);
                args.addProperty("holder", me);
                args.addProperty("now", proto.now());
                args.addProperty("ttlMillis", leaseTtl);
                JsonObject res = proto.store("locks.tryAcquire", args);
                JsonObject l = res.getAsJsonObject("lease");
                if (res.get("acquired").getAsBoolean()) {
                    lease = l;
                    break;
                }
                if (proto.now() > deadline) {
                    throw new Retry("lease " + space + "/" + doc + " held by " + Stores.str(l, "holder"));
                }
                proto.sleep(backoff);
                backoff = Math.min(backoff * 2, 50);
            }
            event("lease-acquire", null, "space", space, "doc", doc, "token", lease.get("token").getAsLong(),
                    "expiresAt", lease.get("expiresAt").getAsLong(), "holder", Stores.str(lease, "holder"));
        }

        /** The fencing check before a write: a holder whose lease ran out or was taken is refused. */
        void renew(JsonObject op) {
            long now = proto.now(), left = lease.get("expiresAt").getAsLong() - now;
            if (left > leaseTtl / 2 && left <= leaseTtl) {
                return;
            }
            JsonObject args = new JsonObject();
            args.add("lease", lease);
            args.addProperty("now", now);
            args.addProperty("ttlMillis", leaseTtl);
            try {
                lease = proto.store("locks.renew", args).getAsJsonObject("lease");
            } catch (Proto.ServiceError e) {
                if ("lease_lost".equals(e.code)) {
                    event("lease-lost", op, "token", lease.get("token").getAsLong(), "holder", Stores.str(lease, "holder"));
                }
                throw e;
            }
            event("lease-renew", null, "space", Stores.str(lease, "space"), "doc", Stores.str(lease, "documentId"),
                    "token", lease.get("token").getAsLong(), "expiresAt", lease.get("expiresAt").getAsLong(), "holder", Stores.str(lease, "holder"));
        }

        @Override
        public void close() {
            long token = lease.get("token").getAsLong();
            String h = Stores.str(lease, "holder"), space = Stores.str(lease, "space"), doc = Stores.str(lease, "documentId");
            event("lease-releasing", null, "space", space, "doc", doc, "token", token, "holder", h);
            JsonObject args = new JsonObject();
            args.add("lease", lease);
            try {
                proto.store("locks.release", args);
                event("lease-release", null, "space", space, "doc", doc, "token", token, "holder", h);
            } catch (Proto.ServiceError e) {
                if (!"lease_lost".equals(e.code)) {
                    throw e;
                }
            }
        }
    }

    // ---- intents ----

    JsonObject ingest(String space, String doc, String opId, String content) throws SQLException {
        String hash = Plans.sha256Hex(content);
        if (opId.isEmpty()) {
            JsonObject cur = db.findCurrent(space, doc);
            opId = Plans.ingestOperationId(space, doc, hash, cur == null ? 0 : cur.get("revision").getAsLong());
        }
        try (Lease lease = new Lease(space, doc)) {
            JsonObject op = db.getOperation(opId);
            if (op != null) {
                // Duplicate delivery: the plan is frozen; run it, never plan again.
                if (!Stores.str(op, "space").equals(space) || !Stores.str(op, "documentId").equals(doc)) {
                    throw new Proto.ServiceError("plan_conflict", true, "operation " + opId + " belongs to another document");
                }
                JsonObject plan = frozenPlan(opId);
                if (!Stores.str(plan, "content").equals(content)) {
                    throw new Proto.ServiceError("plan_conflict", true, "operation " + opId + " was submitted with other content");
                }
                return execute(op, plan, lease);
            }
            JsonObject cur = db.findCurrent(space, doc);
            if (cur != null && "ACTIVE".equals(Stores.str(cur, "status")) && hash.equals(Stores.str(cur, "contentHash"))) {
                return result(opId, "NO_OP", cur.get("revision").getAsLong());
            }
            proto.at("beforeExtract");
            JsonObject ex = proto.model(space, doc, opId, content);
            event("model-call", null, "op", opId, "space", space, "doc", doc, "detail", ex.get("call").getAsString());
            JsonObject plan = Plans.ingestion(opId, space, doc, content, cur, ex);
            return execute(prepareOperation(plan, lease), plan, lease);
        }
    }

    JsonObject retract(String space, String doc) throws SQLException {
        try (Lease lease = new Lease(space, doc)) {
            JsonObject cur = db.findCurrent(space, doc);
            if (cur == null || "RETRACTED".equals(Stores.str(cur, "status"))) {
                return result("", "NO_OP", cur == null ? 0 : cur.get("revision").getAsLong());
            }
            String opId = Plans.retractOperationId(space, doc, cur.get("revision").getAsLong());
            JsonObject op = db.getOperation(opId);
            if (op != null) {
                return execute(op, frozenPlan(opId), lease);
            }
            JsonObject plan = Plans.retraction(opId, cur);
            return execute(prepareOperation(plan, lease), plan, lease);
        }
    }

    /** Continues an operation from its persisted plan; the model is never asked again. */
    JsonObject resume(String opId) throws SQLException {
        JsonObject op = db.getOperation(opId);
        if (op == null) {
            throw new Proto.ServiceError("not_found", true, "resume " + opId + ": the plan was not found");
        }
        if (finished(op)) {
            return finishedResult(op);
        }
        JsonObject plan = frozenPlan(opId);
        if (bugs.contains(RESUME_CALLS_MODEL) && "INGESTION".equals(Stores.str(plan, "kind"))) {
            // The defect: the plan is made again from a new model answer.
            JsonObject ex = proto.model(Stores.str(plan, "space"), Stores.str(plan, "documentId"), opId, Stores.str(plan, "content"));
            event("model-call", null, "op", opId, "detail", ex.get("call").getAsString());
            plan = Plans.ingestion(opId, Stores.str(plan, "space"), Stores.str(plan, "documentId"), Stores.str(plan, "content"),
                    plan.has("previousState") ? plan.getAsJsonObject("previousState") : null, ex);
        }
        try (Lease lease = new Lease(Stores.str(op, "space"), Stores.str(op, "documentId"))) {
            return execute(db.getOperation(opId), plan, lease);
        }
    }

    /** The recovery scan: claim each unfinished operation of the space, resume it, with a bounded retry budget. */
    JsonObject recover(String space, int rounds, long claimTtl) throws SQLException {
        int round = 1;
        boolean quiet = false;
        for (; round <= rounds; round++) {
            List<JsonObject> ops = db.recoverable(space);
            if (ops.isEmpty()) {
                quiet = true;
                break;
            }
            int skipped = 0;
            for (JsonObject op : ops) {
                String id = Stores.str(op, "operationId");
                proto.at("recoveryBeforeClaim");
                if (!db.claim(id, holder, proto.now(), claimTtl)) {
                    skipped++;
                    continue;
                }
                try {
                    proto.at("recoveryBeforeResume");
                    resume(id);
                } catch (Proto.ServiceError e) {
                    JsonObject cur = db.getOperation(id);
                    if (e instanceof Proto.Injected && !((Proto.Injected) e).retryable
                            || cur != null && cur.get("attempts").getAsInt() >= MAX_ATTEMPTS) {
                        deadLetter(cur, e.getMessage());
                    } else {
                        skipped++;
                    }
                }
                db.releaseClaim(id, holder);
            }
            if (skipped > 0 && round < rounds) {
                proto.sleep(Math.max(1, claimTtl / 4));
            }
        }
        if (!quiet) {
            quiet = db.recoverable(space).isEmpty();
            round = rounds;
        }
        JsonObject r = new JsonObject();
        r.addProperty("rounds", round);
        r.addProperty("quiet", quiet);
        return r;
    }

    // ---- the stages ----

    private JsonObject frozenPlan(String opId) throws SQLException {
        String[] p = db.getPlan(opId);
        if (p == null || p[0].isEmpty()) {
            throw new Proto.ServiceError("not_found", true, "operation " + opId + ": the plan was not found");
        }
        return com.google.gson.JsonParser.parseString(p[0]).getAsJsonObject();
    }

    /** prepareOperation: the operation and its plan, frozen once per operationId (first write wins). */
    private JsonObject prepareOperation(JsonObject plan, Lease lease) throws SQLException {
        String text = Proto.GSON.toJson(plan), fingerprint = Plans.sha256Hex(text);
        JsonObject op = new JsonObject();
        op.addProperty("operationId", Stores.str(plan, "operationId"));
        op.addProperty("space", Stores.str(plan, "space"));
        op.addProperty("documentId", Stores.str(plan, "documentId"));
        op.addProperty("expectedRevision", Plans.expectedRevision(plan));
        op.addProperty("planFingerprint", fingerprint);
        op.addProperty("stage", "PREPARED");
        op.addProperty("updatedAt", proto.now());
        proto.at("beforePrepare");
        lease.renew(op);
        if (db.createOperation(op, text)) {
            event("prepared", op, "expected", Plans.expectedRevision(plan), "detail", fingerprint);
        }
        JsonObject stored = db.getOperation(Stores.str(op, "operationId"));
        if (!Stores.str(stored, "planFingerprint").equals(fingerprint)) {
            throw new Proto.ServiceError("plan_conflict", true, "operation " + Stores.str(op, "operationId") + " is frozen with another plan");
        }
        return stored;
    }

    private static boolean finished(JsonObject op) {
        return "COMPLETED".equals(Stores.str(op, "stage")) || !Stores.str(op, "disposition").isEmpty();
    }

    private static JsonObject finishedResult(JsonObject op) {
        String d = Stores.str(op, "disposition");
        if (!d.isEmpty()) {
            return result(Stores.str(op, "operationId"), d, 0);
        }
        return result(Stores.str(op, "operationId"), "ALREADY_COMPLETED", op.get("expectedRevision").getAsLong() + 1);
    }

    private static int rank(JsonObject op) {
        return RANK.get(Stores.str(op, "stage"));
    }

    /** Moves op to stage `to` with the journal's compare-and-set at window p. */
    private JsonObject advance(JsonObject op, String to, String p) throws SQLException {
        JsonObject next = op.deepCopy();
        next.addProperty("stage", to);
        next.addProperty("failureReason", "");
        next.addProperty("updatedAt", Math.max(proto.now(), op.get("updatedAt").getAsLong()));
        proto.at(p);
        if (db.casOperation(op, next)) {
            event("stage", op, "from", Stores.str(op, "stage"), "to", to);
            return next;
        }
        JsonObject stored = db.getOperation(Stores.str(op, "operationId"));
        if (stored != null && rank(stored) >= RANK.get(to) && !"FAILED".equals(Stores.str(stored, "stage"))) {
            return stored;
        }
        throw new Retry("operation " + Stores.str(op, "operationId") + ": stage changed concurrently");
    }

    /** Runs a persisted plan from its stage to COMPLETED. */
    private JsonObject execute(JsonObject op, JsonObject plan, Lease lease) throws SQLException {
        try {
            return run(op, plan, lease);
        } catch (Proto.Injected e) {
            fail(Stores.str(op, "operationId"), e);
            throw e;
        }
    }

    private JsonObject run(JsonObject op, JsonObject plan, Lease lease) throws SQLException {
        if (finished(op)) {
            return finishedResult(op);
        }
        if ("FAILED".equals(Stores.str(op, "stage"))) {
            op = advance(op, "PREPARED", "beforeRetryPrepared");
        }
        String space = Stores.str(op, "space"), doc = Stores.str(op, "documentId"), id = Stores.str(op, "operationId");
        JsonObject committed = db.findByOperationId(space, doc, id);
        if (committed != null) {
            return finishCommitted(op, plan, committed, lease);
        }
        long expected = Plans.expectedRevision(plan);
        JsonObject cur = db.findCurrent(space, doc);
        if ((cur == null ? 0 : cur.get("revision").getAsLong()) != expected) {
            // Another operation committed since this plan was made: it is given up.
            return abandon(op);
        }
        if (bugs.contains(STATE_BEFORE_GRAPH) && "PREPARED".equals(Stores.str(op, "stage"))) {
            // The defect: the state is committed before the graph is written.
            JsonObject st = commitState(op, plan, lease);
            if (st == null) {
                return abandon(op);
            }
            writeGraph(op, plan.getAsJsonObject("mutation"), lease);
            return finishCommitted(op, plan, st, lease);
        }
        if ("PREPARED".equals(Stores.str(op, "stage"))) {
            writeGraph(op, plan.getAsJsonObject("mutation"), lease);
            op = advance(op, "GRAPH_APPLIED", "beforeGraphApplied");
        }
        JsonObject st = commitState(op, plan, lease);
        return st == null ? abandon(op) : finishCommitted(op, plan, st, lease);
    }

    /**
     * The registry, then the revision compare-and-set; returns the state this
     * operation committed, or null when another revision won.
     */
    private JsonObject commitState(JsonObject op, JsonObject plan, Lease lease) throws SQLException {
        String space = Stores.str(op, "space");
        if (plan.has("registrations") && !plan.getAsJsonArray("registrations").isEmpty()) {
            proto.at("beforeRegistrySave");
            db.saveAll(space, plan.getAsJsonArray("registrations"));
        }
        // Heal the history of the revision this plan builds on (a crash may have left it unrecorded).
        if (plan.has("previousState")) {
            JsonObject cur = db.findCurrent(space, Stores.str(op, "documentId"));
            if (cur != null && cur.get("revision").getAsLong() == Plans.expectedRevision(plan)) {
                db.recordVersion(cur);
            }
        }
        JsonObject next = plan.getAsJsonObject("nextState").deepCopy();
        next.addProperty("committedAt", proto.now());
        long expected = Plans.expectedRevision(plan);
        proto.at("beforeStateCommit");
        lease.renew(op);
        if (db.casState(expected, next)) {
            event("state-commit", op, "expected", expected, "rev", next.get("revision").getAsLong(), "holder", Stores.str(lease.lease, "holder"));
            return next;
        }
        return db.findByOperationId(space, Stores.str(op, "documentId"), Stores.str(op, "operationId"));
    }

    private JsonObject finishCommitted(JsonObject op, JsonObject plan, JsonObject st, Lease lease) throws SQLException {
        proto.at("beforeRecordVersion");
        db.recordVersion(st);
        event("version", op, "rev", st.get("revision").getAsLong());
        if (rank(op) < RANK.get("STATE_COMMITTED")) {
            cleanupStale(op, plan);
        }
        String[][] steps = {{"GRAPH_APPLIED", "beforeGraphApplied"}, {"STATE_COMMITTED", "beforeStateCommitted"}, {"COMPLETED", "beforeCompleted"}};
        for (String[] s : steps) {
            if (rank(op) < RANK.get(s[0])) {
                if ("FAILED".equals(Stores.str(op, "stage"))) {
                    op = advance(op, "PREPARED", "beforeRetryPrepared");
                }
                op = advance(op, s[0], s[1]);
            }
        }
        return result(Stores.str(op, "operationId"), "COMPLETED", st.get("revision").getAsLong());
    }

    /** The graph writer: the mutation in batches, each fenced by the lease; edges another ACTIVE document supports are kept. */
    private void writeGraph(JsonObject op, JsonObject mutation, Lease lease) throws SQLException {
        JsonObject m = mutation.deepCopy();
        if (m.has("deleteEdges")) {
            m.add("deleteEdges", unsupported(op, Stores.str(op, "documentId"), m.getAsJsonArray("deleteEdges")));
        }
        List<JsonObject> batches = Plans.batches(m, batchSize);
        for (int i = 0; i < batches.size(); i++) {
            proto.at(i == 0 ? "beforeGraphWrite" : "betweenGraphBatches");
            lease.renew(op);
            JsonObject args = new JsonObject();
            args.addProperty("space", Stores.str(op, "space"));
            args.add("mutation", batches.get(i));
            proto.store("graph.apply", args);
            event("graph-batch", op, "detail", String.valueOf(i + 1), "batch", batches.get(i));
        }
        event("graph-written", op, "detail", String.valueOf(batches.size()));
    }

    /** A failed attempt: PREPARED -> FAILED (later stages keep theirs), one more attempt counted. */
    private void fail(String opId, Proto.ServiceError cause) throws SQLException {
        JsonObject cur = db.getOperation(opId);
        if (cur == null || finished(cur)) {
            return;
        }
        JsonObject next = cur.deepCopy();
        next.addProperty("updatedAt", Math.max(proto.now(), cur.get("updatedAt").getAsLong()));
        next.addProperty("attempts", cur.get("attempts").getAsInt() + 1);
        next.addProperty("failureReason", cause.getMessage());
        if ("PREPARED".equals(Stores.str(cur, "stage"))) {
            next.addProperty("stage", "FAILED");
        }
        proto.at("beforeMarkFailed");
        if (!db.casOperation(cur, next)) {
            return;
        }
        if (!Stores.str(next, "stage").equals(Stores.str(cur, "stage"))) {
            event("stage", cur, "from", Stores.str(cur, "stage"), "to", Stores.str(next, "stage"), "detail", cause.getMessage());
        }
        if (cause instanceof Proto.Injected && !((Proto.Injected) cause).retryable) {
            deadLetter(next, cause.getMessage()); // failed for good: never retried
        }
    }

    /** Gives up a plan another revision overtook: its graph effects nothing supports are removed first. */
    private JsonObject abandon(JsonObject op) throws SQLException {
        reconcile(op);
        return disposition(op, "ABANDONED", "the document moved on since the plan was made");
    }

    /** Dead-letters an operation, leaving the stores consistent for the person who takes it. */
    private void deadLetter(JsonObject op, String reason) throws SQLException {
        if (op != null && !finished(op)) {
            reconcile(op);
            disposition(op, "DEAD_LETTER", reason);
        }
    }

    /**
     * A state the operation committed gets its history and its stale edges
     * cleaned up; the graph effects of a plan that never committed are
     * removed where nothing supports them, and the edges it deleted that an
     * ACTIVE document still supports are put back.
     */
    private void reconcile(JsonObject op) throws SQLException {
        JsonObject plan = frozenPlan(Stores.str(op, "operationId"));
        JsonObject st = db.findByOperationId(Stores.str(op, "space"), Stores.str(op, "documentId"), Stores.str(op, "operationId"));
        if (st != null) {
            db.recordVersion(st);
            cleanupStale(op, plan);
            return;
        }
        JsonObject m = plan.getAsJsonObject("mutation");
        JsonArray upserted = new JsonArray();
        if (m.has("upsertEdges")) {
            for (JsonElement e : m.getAsJsonArray("upsertEdges")) {
                upserted.add(e.getAsJsonObject().get("key"));
            }
        }
        applyGraph(op, deletion(op, unsupported(op, "", upserted)));
        JsonArray deleted = new JsonArray();
        for (String f : new String[] {"deleteEdges", "staleEdges"}) {
            JsonObject from = f.equals("deleteEdges") ? m : plan;
            if (from.has(f)) {
                deleted.addAll(from.getAsJsonArray(f));
            }
        }
        restoreSupported(op, deleted);
    }

    /** After the state commit: the edges the plan made stale that nothing supports any more are deleted. */
    private void cleanupStale(JsonObject op, JsonObject plan) throws SQLException {
        JsonArray cand = new JsonArray();
        if (plan.has("staleEdges")) {
            cand.addAll(plan.getAsJsonArray("staleEdges"));
        }
        JsonObject m = plan.getAsJsonObject("mutation");
        if (m.has("deleteEdges")) {
            cand.addAll(m.getAsJsonArray("deleteEdges"));
        }
        applyGraph(op, deletion(op, unsupported(op, "", cand)));
    }

    /**
     * The edges of keys nothing supports: no ACTIVE state of a document other
     * than excludeDoc ("" excludes none), and no other unfinished operation's
     * plan that will commit them (one document's stale edge must not be
     * deleted between another's graph write and its state commit).
     */
    private JsonArray unsupported(JsonObject op, String excludeDoc, JsonArray keys) throws SQLException {
        JsonArray out = new JsonArray();
        List<JsonObject> pending = null;
        for (JsonElement e : keys) {
            JsonObject k = e.getAsJsonObject();
            if (db.referencedByOther(Stores.str(op, "space"), excludeDoc, k)) {
                continue;
            }
            if (pending == null) {
                pending = pendingPlans(op);
            }
            boolean held = false;
            for (JsonObject p : pending) {
                held |= supports(p.getAsJsonObject("nextState"), k);
            }
            if (!held) {
                out.add(k);
            }
        }
        return out;
    }

    /** The plans of the space's other unfinished operations that will commit an ACTIVE state not yet committed. */
    private List<JsonObject> pendingPlans(JsonObject op) throws SQLException {
        List<JsonObject> out = new java.util.ArrayList<>();
        for (JsonObject o : db.recoverable(Stores.str(op, "space"))) {
            if (Stores.str(o, "operationId").equals(Stores.str(op, "operationId"))) {
                continue;
            }
            String[] text = db.getPlan(Stores.str(o, "operationId"));
            JsonObject p = com.google.gson.JsonParser.parseString(text[0]).getAsJsonObject();
            JsonObject next = p.getAsJsonObject("nextState");
            if (next == null || !"ACTIVE".equals(Stores.str(next, "status"))) {
                continue;
            }
            JsonObject cur = db.findCurrent(Stores.str(o, "space"), Stores.str(o, "documentId"));
            if (cur != null && cur.get("revision").getAsLong() >= next.get("revision").getAsLong()) {
                continue;
            }
            out.add(p);
        }
        return out;
    }

    private static boolean supports(JsonObject state, JsonObject k) {
        if (state == null || !state.has("factSources") || !state.get("factSources").isJsonArray()) {
            return false;
        }
        for (JsonElement e : state.getAsJsonArray("factSources")) {
            if (Plans.sameEdge(e.getAsJsonObject(), k)) {
                return true;
            }
        }
        return false;
    }

    private static JsonObject deletion(JsonObject op, JsonArray edges) {
        JsonObject m = new JsonObject();
        m.addProperty("operationId", Stores.str(op, "operationId"));
        if (!edges.isEmpty()) {
            m.add("deleteEdges", edges);
        }
        return m;
    }

    /** One writer call outside the plan's batches (reconciliation); an empty mutation is no call. */
    private void applyGraph(JsonObject op, JsonObject m) {
        if (!m.has("deleteEdges") && !m.has("upsertNodes") && !m.has("upsertEdges")) {
            return;
        }
        JsonObject args = new JsonObject();
        args.addProperty("space", Stores.str(op, "space"));
        args.add("mutation", m);
        proto.store("graph.apply", args);
        event("graph-batch", op, "detail", "reconcile", "batch", m);
    }

    /** Puts back, from the plan that committed them, the edges among keys an ACTIVE state supports and the graph lacks. */
    private void restoreSupported(JsonObject op, JsonArray keys) throws SQLException {
        if (keys.isEmpty()) {
            return;
        }
        JsonObject args = new JsonObject();
        args.addProperty("space", Stores.str(op, "space"));
        JsonObject g = proto.store("graph.readRecords", args);
        Set<String> nodes = new java.util.HashSet<>(), edges = new java.util.HashSet<>();
        for (JsonElement n : g.getAsJsonArray("nodes")) {
            nodes.add(Stores.str(n.getAsJsonObject(), "id"));
        }
        for (JsonElement e : g.getAsJsonArray("edges")) {
            edges.add(Plans.portable(e.getAsJsonObject().getAsJsonObject("key")));
        }
        JsonArray upNodes = new JsonArray(), upEdges = new JsonArray();
        for (JsonElement ke : keys) {
            JsonObject k = ke.getAsJsonObject();
            if (!edges.add(Plans.portable(k))) {
                continue;
            }
            for (JsonObject st : db.states(Stores.str(op, "space"))) {
                if (!"ACTIVE".equals(Stores.str(st, "status")) || !supports(st, k)) {
                    continue;
                }
                JsonObject m = frozenPlan(Stores.str(st, "operationId")).getAsJsonObject("mutation");
                for (JsonElement e : m.has("upsertEdges") ? m.getAsJsonArray("upsertEdges") : new JsonArray()) {
                    if (Plans.sameEdge(e.getAsJsonObject().getAsJsonObject("key"), k)) {
                        upEdges.add(e);
                    }
                }
                for (JsonElement n : m.getAsJsonArray("upsertNodes")) {
                    String id = Stores.str(n.getAsJsonObject(), "id");
                    if ((id.equals(Stores.str(k, "source")) || id.equals(Stores.str(k, "target"))) && nodes.add(id)) {
                        upNodes.add(n);
                    }
                }
                break;
            }
        }
        JsonObject m = new JsonObject();
        m.addProperty("operationId", Stores.str(op, "operationId"));
        if (!upNodes.isEmpty()) {
            m.add("upsertNodes", upNodes);
        }
        if (!upEdges.isEmpty()) {
            m.add("upsertEdges", upEdges);
        }
        applyGraph(op, m);
    }

    private JsonObject disposition(JsonObject op, String d, String reason) throws SQLException {
        JsonObject next = op.deepCopy();
        next.addProperty("disposition", d);
        next.addProperty("failureReason", reason);
        next.addProperty("updatedAt", Math.max(proto.now(), op.get("updatedAt").getAsLong()));
        if (db.casOperation(op, next)) {
            event("disposition", op, "detail", d + ": " + reason);
        }
        return result(Stores.str(op, "operationId"), d, 0);
    }
}
