package crashmatrix.example;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * System A of crashmatrix on JDBC (SQLite through sqlite-jdbc), speaking the
 * store protocol (docs/store-protocol.md) on stdin/stdout: operations with
 * their plans, document states and versions, the entity registry, the graph
 * and per-document leases, one IMMEDIATE transaction per call. The JVM starts
 * once per store process, never per call.
 *
 * <p>{@code --two-transactions} is a deliberate defect: ops.create commits the
 * operation, then its plan in a second transaction, with the crash window
 * between them declared ({@code jstore/afterOperationRow}). With
 * {@code --undeclared} as well it declares no window: the matrix's
 * durable-step sweep finds the gap from the store's own syncs on the case's
 * lazy mount.
 */
public final class JStore {
    static final String PROTOCOL = "crashmatrix-store/1";

    /** An error reply (section 5 of the protocol). */
    static final class StoreError extends Exception {
        final String code;
        final boolean definite;

        StoreError(String code, String message, boolean definite) {
            super(message);
            this.code = code;
            this.definite = definite;
        }

        StoreError(String code, String message) { this(code, message, true); }
    }

    @FunctionalInterface
    interface Tx<T> { T run() throws Exception; }

    private final BufferedReader in;
    private final OutputStream out;
    private final boolean twoTransactions;
    private final boolean declared;
    private Connection db;
    /** The connection's prepared statements, one per SQL text, prepared at
     *  first use and kept until close: a statement is parsed by SQLite (and
     *  its driver objects made) once per connection, not once per call. */
    private final Map<String, PreparedStatement> stmts = new HashMap<>();
    private long reqId;
    private int step;

    JStore(BufferedReader in, OutputStream out, boolean twoTransactions, boolean declared) {
        this.in = in;
        this.out = out;
        this.twoTransactions = twoTransactions;
        this.declared = declared;
    }

    public static void main(String[] args) throws Exception {
        // sqlite-jdbc extracts its native library to a temporary folder; a
        // store process killed by the crash matrix cannot delete it, so it
        // goes into the case's data folder, removed with the case.
        String dir = System.getenv("CRASHMATRIX_STORE_DIR");
        if (dir != null && System.getProperty("org.sqlite.tmpdir") == null) {
            System.setProperty("org.sqlite.tmpdir", dir);
        }
        boolean two = List.of(args).contains("--two-transactions");
        boolean declared = !List.of(args).contains("--undeclared");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        OutputStream out = new FileOutputStream(FileDescriptor.out);
        new JStore(in, out, two, declared).serve();
    }

    /** Writes msg and its newline to stdout, unbuffered: one write a
     *  message, encoded once (a PrintStream's encoder and flush cost a fresh
     *  JVM more; docs/certify-other-language.md). Stdout gone means crashmatrix
     *  is: the exception ends the store. */
    void send(Map<String, Object> msg) {
        try {
            out.write((Json.write(msg) + "\n").getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Declares a crash window; returns when the step may run. */
    void at(String point) throws Exception {
        step++;
        send(Map.of("id", reqId, "at", Map.of("point", point, "step", step)));
        String line = in.readLine();
        if (line == null) Runtime.getRuntime().halt(137);
        String action = (String) Json.obj(Json.parse(line)).get("action");
        if ("die".equals(action)) Runtime.getRuntime().halt(137);
        if ("fail".equals(action)) throw new StoreError("injected", "injected fault at " + point);
    }

    void serve() throws Exception {
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            Map<String, Object> req = Json.obj(Json.parse(line));
            reqId = ((Number) req.get("id")).longValue();
            step = 0;
            String op = (String) req.get("op");
            Map<String, Object> a = Json.obj(req.getOrDefault("args", new LinkedHashMap<>()));
            Map<String, Object> reply = new LinkedHashMap<>();
            reply.put("id", reqId);
            try {
                reply.put("ok", dispatch(op, a));
            } catch (StoreError e) {
                reply.put("error", error(e.code, e.getMessage(), e.definite));
            } catch (SQLException e) {
                // A failure inside a rolled-back transaction: nothing took effect.
                e.printStackTrace(System.err);
                reply.put("error", error("unavailable", e.toString(), true));
            } catch (Exception e) {
                e.printStackTrace(System.err);
                reply.put("error", error("unavailable", e.toString(), false));
            }
            send(reply);
        }
    }

    static Map<String, Object> error(String code, String message, boolean definite) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("code", code);
        e.put("definite", definite);
        e.put("message", message == null ? "" : message);
        return e;
    }

    Object dispatch(String op, Map<String, Object> a) throws Exception {
        if (op.equals("hello")) {
            if (!PROTOCOL.equals(a.get("protocol"))) {
                throw new StoreError("unsupported", "this store speaks " + PROTOCOL + ", not " + a.get("protocol"));
            }
            if (db != null) throw new StoreError("unsupported", "hello again before close");
            open(Path.of((String) a.get("dir"), "jstore.db").toString());
            // reopen: the database is opened here, at hello, so crashmatrix
            // may keep this process (and its JVM) for another case's
            // snapshot after close (store-protocol.md, section 3).
            return obj("protocol", PROTOCOL, "name", twoTransactions ? "jstore-two-transactions" : "jstore",
                    "stores", List.of("operations", "states", "registry", "graph", "locks"), "reopen", true);
        }
        if (op.equals("close")) {
            // Let go of the case's database; the next request is a hello.
            if (db != null) {
                for (PreparedStatement ps : stmts.values()) ps.close();
                stmts.clear();
                db.close();
            }
            db = null;
            return obj();
        }
        if (db == null) throw new StoreError("unsupported", "hello first");
        switch (op) {
            case "ops.create": return opsCreate(a);
            case "ops.get": return tx(() -> obj("operation", loadOp(s(a, "operationId")).rec));
            case "ops.getPlan": return tx(() -> {
                Loaded l = loadOp(s(a, "operationId"));
                return obj("plan", l.plan == null ? "" : l.plan, "fingerprint", s(l.rec, "planFingerprint"));
            });
            case "ops.cas": return tx(() -> obj("swapped", opsCas(Json.obj(a.get("expected")), Json.obj(a.get("next")))));
            case "ops.listRecoverable": return tx(() -> obj("operations", listOps(
                    "SELECT operation_id FROM operations WHERE stage <> 'COMPLETED' AND disposition = '' ORDER BY updated_at, operation_id LIMIT ?", n(a, "limit"))));
            case "ops.list": return tx(() -> obj("operations", listOps("SELECT operation_id FROM operations ORDER BY operation_id")));
            case "ops.claim": return tx(() -> obj("claimed", claim(a)));
            case "ops.releaseClaim": return tx(() -> obj("released", releaseClaim(a)));
            case "states.findCurrent": return tx(() -> obj("state", current(s(a, "space"), s(a, "documentId"))));
            case "states.findByOperationId": return tx(() -> obj("state", findByOp(a)));
            case "states.cas": return tx(() -> obj("swapped", statesCas(n(a, "expected"), Json.obj(a.get("next")))));
            case "states.remove": return tx(() -> obj("removed", update("DELETE FROM states WHERE space=? AND document_id=? AND revision=?",
                    s(a, "space"), s(a, "documentId"), n(a, "revision")) == 1));
            case "states.recordVersion": return tx(() -> {
                Map<String, Object> st = Json.obj(a.get("state"));
                update("INSERT INTO state_versions(space, document_id, revision, operation_id, record) VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING",
                        s(st, "space"), s(st, "documentId"), n(st, "revision"), s(st, "operationId"), Json.write(st));
                return obj();
            });
            case "states.versions": return tx(() -> obj("states", records(
                    "SELECT record FROM state_versions WHERE space=? AND document_id=? ORDER BY revision", s(a, "space"), s(a, "documentId"))));
            case "states.list": return tx(() -> obj("states", records("SELECT record FROM states WHERE space=? ORDER BY document_id", s(a, "space"))));
            case "states.isReferenced": return tx(() -> obj("referenced", isReferenced(a)));
            case "registry.findMatches": return tx(() -> obj("entities", findMatches(a)));
            case "registry.saveAll": return tx(() -> { saveAll(a); return obj(); });
            case "registry.list": return tx(() -> {
                List<Object> out = new ArrayList<>();
                for (Object id : column("SELECT node_id FROM registry_entities WHERE space=? ORDER BY node_id", s(a, "space"))) {
                    out.add(entity(s(a, "space"), (String) id));
                }
                return obj("entities", out);
            });
            case "graph.apply": return tx(() -> { apply(s(a, "space"), Json.obj(a.get("mutation"))); return obj(); });
            case "graph.readRecords": return tx(() -> readRecords(s(a, "space")));
            case "locks.tryAcquire": return tx(() -> tryAcquire(a));
            case "locks.renew": return tx(() -> renew(a));
            case "locks.release": return tx(() -> { release(Json.obj(a.get("lease"))); return obj(); });
            default: throw new StoreError("unsupported", "unknown op " + op);
        }
    }

    // --- plumbing -------------------------------------------------------------

    void open(String path) throws Exception {
        Properties p = new Properties();
        p.setProperty("busy_timeout", "30000");
        p.setProperty("synchronous", "FULL");
        // The driver's own entry point rather than DriverManager, whose first
        // use scans the class path for every JDBC driver (ServiceLoader): a
        // fresh JVM pays that scan at its first hello
        // (docs/certify-other-language.md, "What a Java team should set").
        db = org.sqlite.JDBC.createConnection("jdbc:sqlite:" + path, p);
        // WAL is kept in the file; switching to it needs the file alone, and
        // the busy timeout does not cover that switch: retry while another
        // process opens the same file.
        for (long deadline = System.currentTimeMillis() + 30_000; ; ) {
            try (Statement st = db.createStatement()) {
                st.execute("PRAGMA journal_mode=WAL");
                break;
            } catch (SQLException e) {
                if (System.currentTimeMillis() > deadline) throw e;
                try {
                    Thread.sleep(5);
                } catch (InterruptedException ie) {
                    throw e;
                }
            }
        }
        // Transactions are begun and ended by tx itself (BEGIN IMMEDIATE):
        // with autocommit off, the driver would begin the next transaction
        // right after each commit and hold the write lock while idle.
        tx(() -> {
            try (Statement st = db.createStatement()) {
                for (String ddl : SCHEMA) st.executeUpdate(ddl);
            }
            return null;
        });
    }

    static final String[] SCHEMA = {
        "CREATE TABLE IF NOT EXISTS operations (operation_id TEXT PRIMARY KEY, space TEXT NOT NULL, stage TEXT NOT NULL, disposition TEXT NOT NULL, "
            + "updated_at INTEGER NOT NULL, claim_holder TEXT NOT NULL DEFAULT '', claim_expires_at INTEGER NOT NULL DEFAULT 0, record TEXT NOT NULL, plan TEXT)",
        "CREATE TABLE IF NOT EXISTS states (space TEXT NOT NULL, document_id TEXT NOT NULL, revision INTEGER NOT NULL, operation_id TEXT NOT NULL, "
            + "status TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (space, document_id))",
        "CREATE TABLE IF NOT EXISTS state_versions (space TEXT NOT NULL, document_id TEXT NOT NULL, revision INTEGER NOT NULL, operation_id TEXT NOT NULL, "
            + "record TEXT NOT NULL, PRIMARY KEY (space, document_id, revision))",
        "CREATE TABLE IF NOT EXISTS registry_names (space TEXT NOT NULL, type_key TEXT NOT NULL, name TEXT NOT NULL, node_id TEXT NOT NULL, "
            + "PRIMARY KEY (space, type_key, name))",
        "CREATE TABLE IF NOT EXISTS registry_entities (space TEXT NOT NULL, node_id TEXT NOT NULL, type TEXT NOT NULL, canonical_name TEXT NOT NULL, "
            + "names TEXT NOT NULL, properties TEXT NOT NULL, PRIMARY KEY (space, node_id))",
        "CREATE TABLE IF NOT EXISTS nodes (space TEXT NOT NULL, id TEXT NOT NULL, label TEXT NOT NULL, properties TEXT NOT NULL, PRIMARY KEY (space, id))",
        "CREATE TABLE IF NOT EXISTS edges (space TEXT NOT NULL, source TEXT NOT NULL, type TEXT NOT NULL, target TEXT NOT NULL, rank INTEGER NOT NULL, "
            + "properties TEXT NOT NULL, PRIMARY KEY (space, source, type, target, rank))",
        "CREATE TABLE IF NOT EXISTS leases (space TEXT NOT NULL, document_id TEXT NOT NULL, holder TEXT NOT NULL, token INTEGER NOT NULL, "
            + "expires_at INTEGER NOT NULL, PRIMARY KEY (space, document_id))",
        "CREATE TABLE IF NOT EXISTS lease_tokens (space TEXT NOT NULL, document_id TEXT NOT NULL, token INTEGER NOT NULL, PRIMARY KEY (space, document_id))",
    };

    /** Runs fn in one IMMEDIATE transaction: rolled back on any failure
     *  (definite), committed after; a failed commit is an unknown outcome. */
    <T> T tx(Tx<T> fn) throws Exception {
        try {
            prepare("BEGIN IMMEDIATE").execute();
        } catch (SQLException e) {
            throw new StoreError("unavailable", "begin: " + e.getMessage(), true);
        }
        T result;
        try {
            result = fn.run();
        } catch (Exception e) {
            prepare("ROLLBACK").execute();
            throw e;
        }
        try {
            prepare("COMMIT").execute();
        } catch (SQLException e) {
            throw new StoreError("unavailable", "commit: " + e.getMessage(), false);
        }
        return result;
    }

    /** The connection's statement for sql (prepared at its first use, then
     *  kept: never closed by the caller) with args bound. */
    PreparedStatement prepare(String sql, Object... args) throws SQLException {
        PreparedStatement ps = stmts.get(sql);
        if (ps == null) {
            ps = db.prepareStatement(sql);
            stmts.put(sql, ps);
        }
        for (int k = 0; k < args.length; k++) ps.setObject(k + 1, args[k]);
        return ps;
    }

    int update(String sql, Object... args) throws SQLException {
        return prepare(sql, args).executeUpdate();
    }

    /** The first row as a list of column values, or null. */
    List<Object> row(String sql, Object... args) throws SQLException {
        try (ResultSet rs = prepare(sql, args).executeQuery()) {
            if (!rs.next()) return null;
            List<Object> r = new ArrayList<>();
            for (int k = 1, n = rs.getMetaData().getColumnCount(); k <= n; k++) r.add(rs.getObject(k));
            return r;
        }
    }

    List<Object> column(String sql, Object... args) throws SQLException {
        List<Object> out = new ArrayList<>();
        try (ResultSet rs = prepare(sql, args).executeQuery()) {
            while (rs.next()) out.add(rs.getObject(1));
        }
        return out;
    }

    List<Object> records(String sql, Object... args) throws SQLException {
        List<Object> out = new ArrayList<>();
        for (Object r : column(sql, args)) out.add(Json.parse((String) r));
        return out;
    }

    static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int k = 0; k < kv.length; k += 2) m.put((String) kv[k], kv[k + 1]);
        return m;
    }

    /** A string field, absent meaning "". */
    static String s(Map<String, Object> m, String k) {
        Object v = m.get(k);
        return v == null ? "" : v.toString();
    }

    /** An integer field, absent meaning 0. */
    static long n(Map<String, Object> m, String k) {
        Object v = m.get(k);
        return v == null ? 0 : ((Number) v).longValue();
    }

    static long num(Object v) { return ((Number) v).longValue(); }

    // --- operations -------------------------------------------------------------

    Object opsCreate(Map<String, Object> a) throws Exception {
        Map<String, Object> op = Json.obj(a.get("operation"));
        String plan = s(a, "plan"), id = s(op, "operationId");
        Tx<Boolean> insert = () -> {
            if (row("SELECT 1 FROM operations WHERE operation_id=?", id) != null) return false;
            update("INSERT INTO operations(operation_id, space, stage, disposition, updated_at, record, plan) VALUES (?,?,?,?,?,?,?)",
                    id, s(op, "space"), s(op, "stage"), s(op, "disposition"), n(op, "updatedAt"), Json.write(op), twoTransactions ? null : plan);
            return true;
        };
        boolean created = tx(insert);
        if (!twoTransactions || !created) return obj("created", created);
        // The defect: the plan in a second transaction.
        if (declared) at("jstore/afterOperationRow");
        tx(() -> update("UPDATE operations SET plan=? WHERE operation_id=?", plan, id));
        return obj("created", true);
    }

    record Loaded(Map<String, Object> rec, String plan) {}

    Loaded loadOp(String id) throws Exception {
        List<Object> r = row("SELECT record, claim_holder, claim_expires_at, plan FROM operations WHERE operation_id=?", id);
        if (r == null) throw new StoreError("not_found", "operation " + id);
        Map<String, Object> rec = Json.obj(Json.parse((String) r.get(0)));
        rec.remove("claimHolder");
        rec.remove("claimExpiresAt");
        if (!((String) r.get(1)).isEmpty()) {
            rec.put("claimHolder", r.get(1));
            rec.put("claimExpiresAt", num(r.get(2)));
        }
        return new Loaded(rec, (String) r.get(3));
    }

    List<Object> listOps(String sql, Object... args) throws Exception {
        List<Object> out = new ArrayList<>();
        for (Object id : column(sql, args)) out.add(loadOp((String) id).rec);
        return out;
    }

    static final String[] MATCH = {"operationId", "space", "documentId", "planFingerprint", "stage", "disposition"};
    static final String[] MATCH_NUM = {"expectedRevision", "attempts"};
    static final String[] MUTABLE_STR = {"stage", "failureReason", "disposition", "supersededBy"};
    static final String[] MUTABLE_NUM = {"updatedAt", "attempts"};

    boolean opsCas(Map<String, Object> expected, Map<String, Object> next) throws Exception {
        Map<String, Object> stored = loadOp(s(expected, "operationId")).rec;
        for (String f : MATCH) if (!s(stored, f).equals(s(expected, f))) return false;
        for (String f : MATCH_NUM) if (n(stored, f) != n(expected, f)) return false;
        if (n(next, "updatedAt") < n(stored, "updatedAt")) {
            throw new StoreError("time_backwards", "operation " + s(expected, "operationId") + ": updatedAt "
                    + n(next, "updatedAt") + " before " + n(stored, "updatedAt"));
        }
        for (String f : MUTABLE_STR) stored.put(f, s(next, f));
        for (String f : MUTABLE_NUM) stored.put(f, n(next, f));
        update("UPDATE operations SET stage=?, disposition=?, updated_at=?, record=? WHERE operation_id=?",
                s(stored, "stage"), s(stored, "disposition"), n(stored, "updatedAt"), Json.write(stored), s(expected, "operationId"));
        return true;
    }

    boolean claim(Map<String, Object> a) throws Exception {
        List<Object> r = row("SELECT claim_holder, claim_expires_at FROM operations WHERE operation_id=?", s(a, "operationId"));
        if (r == null) throw new StoreError("not_found", "operation " + s(a, "operationId"));
        String holder = (String) r.get(0);
        if (!holder.isEmpty() && !holder.equals(s(a, "holder")) && num(r.get(1)) > n(a, "now")) return false;
        update("UPDATE operations SET claim_holder=?, claim_expires_at=? WHERE operation_id=?",
                s(a, "holder"), n(a, "now") + n(a, "ttlMillis"), s(a, "operationId"));
        return true;
    }

    boolean releaseClaim(Map<String, Object> a) throws Exception {
        List<Object> r = row("SELECT claim_holder FROM operations WHERE operation_id=?", s(a, "operationId"));
        if (r == null) throw new StoreError("not_found", "operation " + s(a, "operationId"));
        if (s(a, "holder").isBlank() || !r.get(0).equals(s(a, "holder"))) return false;
        update("UPDATE operations SET claim_holder='', claim_expires_at=0 WHERE operation_id=?", s(a, "operationId"));
        return true;
    }

    // --- document states ----------------------------------------------------------

    Object current(String space, String doc) throws SQLException {
        List<Object> r = row("SELECT record FROM states WHERE space=? AND document_id=?", space, doc);
        return r == null ? null : Json.parse((String) r.get(0));
    }

    Object findByOp(Map<String, Object> a) throws SQLException {
        Object cur = current(s(a, "space"), s(a, "documentId"));
        if (cur != null && s(Json.obj(cur), "operationId").equals(s(a, "operationId"))) return cur;
        List<Object> r = row("SELECT record FROM state_versions WHERE space=? AND document_id=? AND operation_id=? ORDER BY revision DESC LIMIT 1",
                s(a, "space"), s(a, "documentId"), s(a, "operationId"));
        return r == null ? null : Json.parse((String) r.get(0));
    }

    boolean statesCas(long expected, Map<String, Object> next) throws SQLException {
        List<Object> r = row("SELECT revision FROM states WHERE space=? AND document_id=?", s(next, "space"), s(next, "documentId"));
        if ((r == null ? 0 : num(r.get(0))) != expected) return false;
        update("INSERT INTO states(space, document_id, revision, operation_id, status, record) VALUES (?,?,?,?,?,?) "
                + "ON CONFLICT(space, document_id) DO UPDATE SET revision=excluded.revision, operation_id=excluded.operation_id, "
                + "status=excluded.status, record=excluded.record",
                s(next, "space"), s(next, "documentId"), n(next, "revision"), s(next, "operationId"), s(next, "status"), Json.write(next));
        return true;
    }

    static String edgeKey(Map<String, Object> k) {
        return s(k, "source") + "\u001f" + s(k, "type") + "\u001f" + s(k, "target") + "\u001f" + n(k, "rank");
    }

    boolean isReferenced(Map<String, Object> a) throws SQLException {
        String want = edgeKey(Json.obj(a.get("edge")));
        try (ResultSet rs = prepare("SELECT document_id, record FROM states WHERE space=? AND status='ACTIVE'", s(a, "space")).executeQuery()) {
            while (rs.next()) {
                if (!s(a, "documentId").isEmpty() && rs.getString(1).equals(s(a, "documentId"))) continue;
                for (Object k : Json.list(Json.obj(Json.parse(rs.getString(2))).get("factSources"))) {
                    if (edgeKey(Json.obj(k)).equals(want)) return true;
                }
            }
        }
        return false;
    }

    // --- registry ------------------------------------------------------------------

    Map<String, Object> entity(String space, String id) throws SQLException {
        List<Object> r = row("SELECT type, canonical_name, names, properties FROM registry_entities WHERE space=? AND node_id=?", space, id);
        Map<String, Object> e = obj("space", space, "nodeId", id, "type", r.get(0), "canonicalName", r.get(1),
                "names", new ArrayList<>(new TreeSet<>(Json.list(Json.parse((String) r.get(2))).stream().map(Object::toString).toList())));
        Map<String, Object> props = Json.obj(Json.parse((String) r.get(3)));
        if (!props.isEmpty()) e.put("properties", props);
        return e;
    }

    List<Object> findMatches(Map<String, Object> a) throws SQLException {
        TreeSet<String> ids = new TreeSet<>();
        for (Object name : Json.list(a.get("names"))) {
            List<Object> r = row("SELECT node_id FROM registry_names WHERE space=? AND type_key=? AND name=?", s(a, "space"), s(a, "typeKey"), name);
            if (r != null) ids.add((String) r.get(0));
        }
        List<Object> out = new ArrayList<>();
        for (String id : ids) out.add(entity(s(a, "space"), id));
        return out;
    }

    void saveAll(Map<String, Object> a) throws Exception {
        String space = s(a, "space");
        List<Object> regs = Json.list(a.get("registrations"));
        Map<String, String> batch = new LinkedHashMap<>();
        for (Object o : regs) {
            Map<String, Object> r = Json.obj(o);
            for (Object name : Json.list(r.get("names"))) {
                String key = s(r, "typeKey") + "\n" + name;
                List<Object> bound = row("SELECT node_id FROM registry_names WHERE space=? AND type_key=? AND name=?", space, s(r, "typeKey"), name);
                if (bound != null && !bound.get(0).equals(s(r, "nodeId"))) {
                    throw new StoreError("registry_conflict", "name " + name + " (type " + s(r, "typeKey") + ") is bound to " + bound.get(0) + ", not " + s(r, "nodeId"));
                }
                String prev = batch.putIfAbsent(key, s(r, "nodeId"));
                if (prev != null && !prev.equals(s(r, "nodeId"))) {
                    throw new StoreError("registry_conflict", "name " + name + " is bound to " + prev + " and " + s(r, "nodeId") + " in one batch");
                }
            }
        }
        for (Object o : regs) {
            Map<String, Object> r = Json.obj(o);
            List<Object> cur = row("SELECT names, properties FROM registry_entities WHERE space=? AND node_id=?", space, s(r, "nodeId"));
            TreeSet<String> names = new TreeSet<>();
            Map<String, Object> props = new TreeMap<>();
            if (cur == null) {
                update("INSERT INTO registry_entities(space, node_id, type, canonical_name, names, properties) VALUES (?,?,?,?,'[]','{}')",
                        space, s(r, "nodeId"), s(r, "type"), s(r, "canonicalName"));
            } else {
                for (Object x : Json.list(Json.parse((String) cur.get(0)))) names.add(x.toString());
                props.putAll(Json.obj(Json.parse((String) cur.get(1))));
            }
            for (Object x : Json.list(r.get("names"))) names.add(x.toString());
            if (r.get("properties") != null) props.putAll(Json.obj(r.get("properties")));
            update("UPDATE registry_entities SET names=?, properties=? WHERE space=? AND node_id=?",
                    Json.write(new ArrayList<>(names)), Json.write(props), space, s(r, "nodeId"));
            for (Object x : Json.list(r.get("names"))) {
                update("INSERT INTO registry_names(space, type_key, name, node_id) VALUES (?,?,?,?) ON CONFLICT DO NOTHING", space, s(r, "typeKey"), x, s(r, "nodeId"));
            }
        }
    }

    // --- graph -----------------------------------------------------------------------

    static Map<String, Object> merged(Object stored, Object given) {
        Map<String, Object> props = new TreeMap<>();
        if (stored != null) props.putAll(Json.obj(Json.parse((String) stored)));
        if (given != null) props.putAll(Json.obj(given));
        return props;
    }

    void apply(String space, Map<String, Object> m) throws Exception {
        for (Object id : Json.list(m.get("deleteNodes"))) {
            update("DELETE FROM nodes WHERE space=? AND id=?", space, id);
            update("DELETE FROM edges WHERE space=? AND (source=? OR target=?)", space, id, id);
        }
        for (Object o : Json.list(m.get("deleteEdges"))) {
            Map<String, Object> k = Json.obj(o);
            update("DELETE FROM edges WHERE space=? AND source=? AND type=? AND target=? AND rank=?", space, s(k, "source"), s(k, "type"), s(k, "target"), n(k, "rank"));
        }
        for (Object o : Json.list(m.get("upsertNodes"))) {
            Map<String, Object> node = Json.obj(o);
            List<Object> cur = row("SELECT properties FROM nodes WHERE space=? AND id=?", space, s(node, "id"));
            String props = Json.write(merged(cur == null ? null : cur.get(0), node.get("properties")));
            if (cur != null) update("UPDATE nodes SET properties=? WHERE space=? AND id=?", props, space, s(node, "id"));
            else update("INSERT INTO nodes(space, id, label, properties) VALUES (?,?,?,?)", space, s(node, "id"), s(node, "label"), props);
        }
        List<Object> edges = Json.list(m.get("upsertEdges"));
        for (Object o : edges) {
            Map<String, Object> k = Json.obj(Json.obj(o).get("key"));
            for (String end : new String[] {s(k, "source"), s(k, "target")}) {
                if (row("SELECT 1 FROM nodes WHERE space=? AND id=?", space, end) == null) {
                    throw new StoreError("missing_endpoint", "space " + space + ": edge " + s(k, "source") + "-" + s(k, "type") + "->" + s(k, "target") + ": node " + end + " does not exist");
                }
            }
        }
        for (Object o : edges) {
            Map<String, Object> e = Json.obj(o);
            Map<String, Object> k = Json.obj(e.get("key"));
            Object[] key = {space, s(k, "source"), s(k, "type"), s(k, "target"), n(k, "rank")};
            List<Object> cur = row("SELECT properties FROM edges WHERE space=? AND source=? AND type=? AND target=? AND rank=?", key);
            String props = Json.write(merged(cur == null ? null : cur.get(0), e.get("properties")));
            if (cur != null) {
                update("UPDATE edges SET properties=? WHERE space=? AND source=? AND type=? AND target=? AND rank=?", props, key[0], key[1], key[2], key[3], key[4]);
            } else {
                update("INSERT INTO edges(space, source, type, target, rank, properties) VALUES (?,?,?,?,?,?)", key[0], key[1], key[2], key[3], key[4], props);
            }
        }
    }

    Map<String, Object> readRecords(String space) throws SQLException {
        List<Object> nodes = new ArrayList<>(), edges = new ArrayList<>();
        try (ResultSet rs = prepare("SELECT id, label, properties FROM nodes WHERE space=?", space).executeQuery()) {
            while (rs.next()) nodes.add(obj("id", rs.getString(1), "label", rs.getString(2), "properties", Json.parse(rs.getString(3))));
        }
        try (ResultSet rs = prepare("SELECT source, type, target, rank, properties FROM edges WHERE space=?", space).executeQuery()) {
            while (rs.next()) {
                edges.add(obj("key", obj("source", rs.getString(1), "type", rs.getString(2), "target", rs.getString(3), "rank", rs.getLong(4)),
                        "properties", Json.parse(rs.getString(5))));
            }
        }
        return obj("nodes", nodes, "edges", edges);
    }

    // --- leases ------------------------------------------------------------------------

    static Map<String, Object> lease(String space, String doc, Object holder, long token, long expiresAt) {
        return obj("space", space, "documentId", doc, "holder", holder, "token", token, "expiresAt", expiresAt);
    }

    Map<String, Object> tryAcquire(Map<String, Object> a) throws SQLException {
        String space = s(a, "space"), doc = s(a, "documentId"), holder = s(a, "holder");
        long now = n(a, "now"), ttl = n(a, "ttlMillis");
        List<Object> r = row("SELECT holder, token, expires_at FROM leases WHERE space=? AND document_id=?", space, doc);
        if (r != null && num(r.get(2)) > now) {
            if (!r.get(0).equals(holder)) return obj("lease", lease(space, doc, r.get(0), num(r.get(1)), num(r.get(2))), "acquired", false);
            update("UPDATE leases SET expires_at=? WHERE space=? AND document_id=?", now + ttl, space, doc);
            return obj("lease", lease(space, doc, holder, num(r.get(1)), now + ttl), "acquired", true);
        }
        List<Object> t = row("SELECT token FROM lease_tokens WHERE space=? AND document_id=?", space, doc);
        long token = (t == null ? 0 : num(t.get(0))) + 1;
        update("INSERT INTO lease_tokens(space, document_id, token) VALUES (?,?,?) ON CONFLICT(space, document_id) DO UPDATE SET token=excluded.token", space, doc, token);
        update("INSERT INTO leases(space, document_id, holder, token, expires_at) VALUES (?,?,?,?,?) ON CONFLICT(space, document_id) DO UPDATE SET "
                + "holder=excluded.holder, token=excluded.token, expires_at=excluded.expires_at", space, doc, holder, token, now + ttl);
        return obj("lease", lease(space, doc, holder, token, now + ttl), "acquired", true);
    }

    List<Object> heldLease(Map<String, Object> l) throws Exception {
        List<Object> r = row("SELECT holder, token, expires_at FROM leases WHERE space=? AND document_id=?", s(l, "space"), s(l, "documentId"));
        if (r == null) throw new StoreError("lease_lost", "no lease is held");
        if (!r.get(0).equals(s(l, "holder")) || num(r.get(1)) != n(l, "token")) {
            throw new StoreError("lease_lost", "held by " + r.get(0) + " with token " + r.get(1));
        }
        return r;
    }

    Map<String, Object> renew(Map<String, Object> a) throws Exception {
        Map<String, Object> l = Json.obj(a.get("lease"));
        long now = n(a, "now");
        List<Object> r = heldLease(l);
        if (num(r.get(2)) <= now) throw new StoreError("lease_lost", "expired at " + r.get(2) + " (now " + now + ")");
        update("UPDATE leases SET expires_at=? WHERE space=? AND document_id=?", now + n(a, "ttlMillis"), s(l, "space"), s(l, "documentId"));
        return obj("lease", lease(s(l, "space"), s(l, "documentId"), r.get(0), num(r.get(1)), now + n(a, "ttlMillis")));
    }

    void release(Map<String, Object> l) throws Exception {
        heldLease(l);
        update("DELETE FROM leases WHERE space=? AND document_id=?", s(l, "space"), s(l, "documentId"));
    }
}
